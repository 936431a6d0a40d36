# Entry points for developers and CI. The integration tests need the local stack
# (real Kafka + ClickHouse on loopback, see scripts/stack.sh); `make test` starts it.

GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: build test demo stack-up stack-down stack-status stack-logs

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/sink ./cmd/sink

# SINK_REQUIRE_STACK=1 turns "stack not reachable" skips into failures, so a run
# cannot pass while silently skipping every integration test.
test: stack-up
	bash scripts/test.sh

demo: stack-up
	bash scripts/demo.sh

stack-up:
	bash scripts/stack.sh up

stack-down:
	bash scripts/stack.sh down

stack-status:
	bash scripts/stack.sh status

stack-logs:
	bash scripts/stack.sh logs
