"""The ``schema.registry.*`` options (formats/registry_config.py) and the wording of the
registry client's sign-in refusals (formats/registry_http.py)."""

from __future__ import annotations

import pickle

import pytest

from eos_kafka_source.errors import ConfigError
from eos_kafka_source.formats.registry import REGISTRY_OPTIONS, RegistryConfig
from eos_kafka_source.formats.registry_http import Answer, _answer, _refused

SECRET = "s3cr3t-7f3KzQ9X"
URL = "http://registry:8081"


def parse(**options: str) -> RegistryConfig:
    config = RegistryConfig.parse({k.replace("_", "."): v for k, v in options.items()})
    assert config is not None
    return config


def test_no_registry_option_is_no_config() -> None:
    assert RegistryConfig.parse({}) is None
    assert RegistryConfig.parse({"subscribe": "t", "kafka.bootstrap.servers": "b:9092"}) is None


def test_defaults() -> None:
    config = parse(schema_registry_url=URL)
    assert config.urls == (URL,)
    assert (config.timeout_ms, config.max_retries, config.retries_wait_ms,
            config.retries_max_wait_ms) == (10_000, 3, 1_000, 20_000)
    assert config.basic is None and config.bearer_token is None and not config.tls
    assert config.sign_in_option is None


def test_keys_are_case_insensitive_as_in_spark() -> None:
    config = RegistryConfig.parse({"Schema.Registry.URL": URL,
                                   "schema.registry.Basic.Auth.User.Info": "u:p"})
    assert config is not None and config.urls == (URL,) and config.basic == ("u", "p")


def test_url_list_in_order_without_trailing_slashes() -> None:
    config = parse(schema_registry_url=" https://a:8081/ , https://b:8081/apis/ccompat/v7/ ")
    assert config.urls == ("https://a:8081", "https://b:8081/apis/ccompat/v7")
    assert config.tls


@pytest.mark.parametrize("url", ["registry:8081", "ftp://registry", "http://", " , "])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="schema.registry.url"):
        parse(schema_registry_url=url)


def test_unknown_key_names_the_closest() -> None:
    with pytest.raises(ConfigError) as refused:
        parse(schema_registry_url=URL, schema_registry_basic_auth_userinfo="u:p")
    text = str(refused.value)
    assert "'schema.registry.basic.auth.userinfo'" in text
    assert "Did you mean 'schema.registry.basic.auth.user.info'?" in text
    assert "EOSKAFKA_INVALID_OPTION" in text and "u:p" not in text


def test_other_registry_options_need_the_url() -> None:
    with pytest.raises(ConfigError, match="schema.registry.url is required"):
        parse(schema_registry_bearer_auth_token=SECRET)


def test_registry_options_are_canonical() -> None:
    assert len(set(REGISTRY_OPTIONS)) == len(REGISTRY_OPTIONS)
    assert all(o.startswith("schema.registry.") and o == o.lower() for o in REGISTRY_OPTIONS)
    assert {"schema.registry.url", "schema.registry.basic.auth.user.info",
            "schema.registry.bearer.auth.token", "schema.registry.ssl.ca.location",
            "schema.registry.ssl.certificate.location", "schema.registry.ssl.key.location",
            "schema.registry.ssl.key.password"} <= set(REGISTRY_OPTIONS)


def test_sign_in_options_are_secret_everywhere() -> None:
    """Any option parser's ``shown`` hides them (Spark's options reach many messages)."""
    from eos_kafka_source.client.keys import shown

    for key in ("schema.registry.basic.auth.user.info", "schema.registry.bearer.auth.token",
                "schema.registry.ssl.key.password"):
        assert shown(key, SECRET) == "'***'"
    assert shown("schema.registry.url", URL) == repr(URL)


def test_basic_sign_in_from_user_info() -> None:
    config = parse(schema_registry_url=URL, schema_registry_basic_auth_user_info=f"me:{SECRET}:x")
    assert config.basic == ("me", f"{SECRET}:x")  # the password may hold colons
    assert config.sign_in_option == "schema.registry.basic.auth.user.info"


@pytest.mark.parametrize("info", [SECRET, f":{SECRET}"])
def test_user_info_without_a_user_is_refused_without_showing_it(info: str) -> None:
    with pytest.raises(ConfigError, match="user:password") as refused:
        parse(schema_registry_url=URL, schema_registry_basic_auth_user_info=info)
    assert SECRET not in str(refused.value)


def test_credentials_in_the_url() -> None:
    config = parse(schema_registry_url=f"https://me:{SECRET}%40x@registry:8081/,https://b")
    assert config.urls == ("https://registry:8081", "https://b")
    assert config.basic == ("me", f"{SECRET}@x")
    assert config.sign_in_option == "schema.registry.url"
    assert SECRET not in repr(config)
    with pytest.raises(ConfigError, match="keep one") as both:
        parse(schema_registry_url=f"https://me:{SECRET}@registry",
              schema_registry_basic_auth_user_info="u:p")
    assert SECRET not in str(both.value)


def test_credentials_source() -> None:
    assert parse(schema_registry_url=URL, schema_registry_basic_auth_credentials_source="user_info",
                 schema_registry_basic_auth_user_info="u:p").basic == ("u", "p")
    with pytest.raises(ConfigError, match="needs schema.registry.basic.auth.user.info"):
        parse(schema_registry_url=URL, schema_registry_basic_auth_credentials_source="USER_INFO")
    with pytest.raises(ConfigError, match="carries no user:password"):
        parse(schema_registry_url=URL, schema_registry_basic_auth_credentials_source="URL")
    with pytest.raises(ConfigError, match="SASL_INHERIT"):
        parse(schema_registry_url=URL,
              schema_registry_basic_auth_credentials_source="SASL_INHERIT")
    with pytest.raises(ConfigError, match="STATIC_TOKEN"):
        parse(schema_registry_url=URL, schema_registry_bearer_auth_credentials_source="OAUTHBEARER")


def test_bearer_token_and_its_headers() -> None:
    config = parse(schema_registry_url=URL, schema_registry_bearer_auth_token=f" {SECRET} ",
                   schema_registry_bearer_auth_logical_cluster="lsrc-1",
                   schema_registry_bearer_auth_identity_pool_id="pool-2")
    assert (config.bearer_token, config.logical_cluster, config.identity_pool) == (
        SECRET, "lsrc-1", "pool-2")
    assert config.sign_in_option == "schema.registry.bearer.auth.token"
    with pytest.raises(ConfigError, match="goes with a bearer token"):
        parse(schema_registry_url=URL, schema_registry_bearer_auth_logical_cluster="lsrc-1")


def test_one_sign_in_only() -> None:
    with pytest.raises(ConfigError, match="both set") as refused:
        parse(schema_registry_url=URL, schema_registry_basic_auth_user_info=f"u:{SECRET}",
              schema_registry_bearer_auth_token=SECRET)
    assert SECRET not in str(refused.value)


def test_tls_options() -> None:
    config = parse(schema_registry_url="https://registry", schema_registry_ssl_ca_location="ca.pem",
                   schema_registry_ssl_certificate_location="c.pem",
                   schema_registry_ssl_key_location="k.pem",
                   schema_registry_ssl_key_password=SECRET)
    assert (config.ca_location, config.certificate_location, config.key_location,
            config.key_password) == ("ca.pem", "c.pem", "k.pem", SECRET)


def test_tls_options_need_https() -> None:
    with pytest.raises(ConfigError, match="not https"):
        parse(schema_registry_url=f"https://a,{URL}", schema_registry_ssl_ca_location="ca.pem")


@pytest.mark.parametrize("key", ["key.location", "key.password"])
def test_a_key_needs_its_certificate(key: str) -> None:
    with pytest.raises(ConfigError, match="needs schema.registry.ssl.certificate.location") as e:
        RegistryConfig.parse({"schema.registry.url": "https://a",
                              f"schema.registry.ssl.{key}": SECRET})
    assert SECRET not in str(e.value)


@pytest.mark.parametrize(("key", "value"), [("request.timeout.ms", "0"), ("max.retries", "-1"),
                                            ("retries.wait.ms", "soon"),
                                            ("retries.max.wait.ms", "1.5")])
def test_numbers_are_checked(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"schema.registry.{key} must be"):
        RegistryConfig.parse({"schema.registry.url": URL, f"schema.registry.{key}": value})


def test_numbers() -> None:
    config = parse(schema_registry_url=URL, schema_registry_request_timeout_ms="2500",
                   schema_registry_max_retries="0", schema_registry_retries_wait_ms="0",
                   schema_registry_retries_max_wait_ms="100")
    assert (config.timeout_ms, config.max_retries, config.retries_wait_ms,
            config.retries_max_wait_ms) == (2500, 0, 0, 100)


def test_config_ships_to_executors_and_keys_a_cache() -> None:
    config = parse(schema_registry_url=URL, schema_registry_basic_auth_user_info=f"u:{SECRET}")
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config and hash(copy) == hash(config)
    assert SECRET not in repr(config) and SECRET not in str(config)
    other = parse(schema_registry_url=URL, schema_registry_basic_auth_user_info="u:other")
    assert other != config


# -- what a refused sign-in says -----------------------------------------------------------


def _refusal(status: int, **options: str) -> str:
    answer = _answer(URL, status, b'{"error_code": 40101, "message": "Unauthorized"}')
    return _refused(parse(schema_registry_url=URL, **options), "GET", "/schemas/ids/1", answer)


def test_a_refused_sign_in_names_the_option_to_fix() -> None:
    basic = _refusal(401, schema_registry_basic_auth_user_info=f"u:{SECRET}")
    assert basic.startswith(f"the schema registry at {URL} refused GET /schemas/ids/1 "
                            f"(HTTP 401, error_code 40101: Unauthorized)")
    assert basic.endswith("fix schema.registry.basic.auth.user.info.")
    bearer = _refusal(401, schema_registry_bearer_auth_token=SECRET)
    assert bearer.endswith("fix schema.registry.bearer.auth.token.")
    nothing = _refusal(401)
    assert "no credentials were sent" in nothing
    assert "schema.registry.basic.auth.user.info" in nothing
    forbidden = _refusal(403, schema_registry_bearer_auth_token=SECRET)
    assert "were accepted but may not do this" in forbidden
    for text in (basic, bearer, forbidden):
        assert SECRET not in text


def test_an_answer_without_a_registry_error() -> None:
    assert Answer(URL, 502, None).quoted() == "HTTP 502 with no registry error in the body"
    html = _answer(URL, 404, b"<html>not here</html>")
    assert (html.body, html.error_code, html.message) == (None, None, None)
