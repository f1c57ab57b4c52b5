"""Hand-offs written by 0.1.0 still load: the JSON in a decision log, and the pickle a
task sends the driver. 0.1.0's hand-off carried ``digest`` (never read); this version
does not, within the same format 2."""

from __future__ import annotations

import base64
import pickle

from eos_kafka_source.sink.handoff import FORMAT, TxnHandoff

#: ``pickle.dumps(h, protocol=2)`` of this hand-off, made by 0.1.0's handoff.py (its
#: TxnHandoff with ``digest="0123456789abcdef"``).
_PICKLED_BY_0_1_0 = (
    "gAJjZW9zX2thZmthX3NvdXJjZS5zaW5rLmhhbmRvZmYKVHhuSGFuZG9mZgpxACmBcQF9cQIoWBAAAAB0cmFu"
    "c2FjdGlvbmFsX2lkcQNYAwAAAHAtMHEEWAsAAABwcm9kdWNlcl9pZHEFSwdYBQAAAGVwb2NocQZLAlgMAAAA"
    "dHhuX3Byb3RvY29scQdLAlgEAAAAb3BlbnEIiFgKAAAAcGFydGl0aW9uc3EJWAEAAAB0cQpLAEsDh3ELhXEM"
    "WAcAAAByZWNvcmRzcQ1LA1gFAAAAYnl0ZXNxDk0sAVgOAAAAdGFza19wYXJ0aXRpb25xD0sAWAcAAABhdHRl"
    "bXB0cRBLAVgPAAAAdGFza19hdHRlbXB0X2lkcRFLC1gIAAAAYmF0Y2hfaWRxEksFWAUAAABvd25lcnETWAMA"
    "AABvd25xFFgHAAAAbGluZWFnZXEVWAMAAABxLTFxFlgNAAAAZmlyc3Rfb2Zmc2V0c3EXaApLAEsoh3EYhXEZ"
    "WAYAAABkaWdlc3RxGlgQAAAAMDEyMzQ1Njc4OWFiY2RlZnEbWAgAAABkZWxpdmVyeXEcWAwAAABleGFjdGx5"
    "X29uY2VxHVgFAAAAZXh0cmFxHn1xH3ViLg=="
)

_SAME = TxnHandoff("p-0", 7, 2, 2, True, (("t", 0, 3),), records=3, bytes=300,
                   task_partition=0, attempt=1, task_attempt_id=11, batch_id=5, owner="own",
                   lineage="q-1", first_offsets=(("t", 0, 40),))


def test_a_hand_off_pickled_by_0_1_0_unpickles_without_its_digest() -> None:
    handoff = pickle.loads(base64.b64decode(_PICKLED_BY_0_1_0))
    assert handoff == _SAME
    assert "digest" not in vars(handoff)
    assert handoff.to_json() == _SAME.to_json()


def test_a_hand_off_pickled_without_a_later_field_takes_its_default() -> None:
    """The other direction of a mixed upgrade: a field this version has, missing from an
    older pickle, reads as its default rather than failing on first use."""
    state = {k: v for k, v in vars(_SAME).items() if k not in ("delivery", "extra")}
    handoff = object.__new__(TxnHandoff)
    handoff.__setstate__(state)
    assert handoff == _SAME and handoff.extra == {} and handoff.delivery == "exactly_once"


def test_a_hand_off_json_of_0_1_0_with_its_digest_loads() -> None:
    data = {**_SAME.to_json(), "digest": "0123456789abcdef"}
    assert data["format"] == FORMAT == 2
    assert TxnHandoff.from_json(data) == _SAME
    assert "digest" not in _SAME.to_json()


def test_pickle_round_trip_keeps_every_field() -> None:
    assert pickle.loads(pickle.dumps(_SAME)) == _SAME
