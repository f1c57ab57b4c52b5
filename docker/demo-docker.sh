#!/usr/bin/env bash
# `make demo-docker`: the demo against real Apache Kafka in Docker, when an engine is running.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v docker >/dev/null 2>&1; then
  echo "demo-docker: no 'docker' command on this machine; install Docker, or run 'make demo' (embedded broker)" >&2
  exit 2
fi
if ! docker info >/dev/null 2>&1; then
  echo "demo-docker: the Docker client is installed but no Docker engine is running (docker info failed); start one, or run 'make demo' (embedded broker)" >&2
  exit 2
fi
trap 'docker compose -f docker-compose.yml down -v >/dev/null 2>&1 || true' EXIT
docker compose -f docker-compose.yml up --build --abort-on-container-exit --exit-code-from spark
