"""Serve ClickHouse 26.9 from PyPI's chdb-core wheel over TCP and HTTP.

Usage: ch26.py CONFIG_DIR DATA_DIR

chdb embeds clickhouse-local. clickhouse-local reads config.xml from its working
directory (listen_host, ports, users, query_log/part_log), so the launcher first
changes into CONFIG_DIR. `SYSTEM START LISTEN` opens the listeners, which live as
long as the query that opened them: a keep-alive query sleeps one row per second
(max() over sleepEachRow keeps the sleep; count() would be optimized into a
spin). SIGTERM or SIGINT ends the process, and with it the server.
"""
import os
import signal
import sys
import threading

KEEPALIVE = (
    "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; "
    "SELECT max(sleepEachRow(1)) FROM numbers(315360000) "
    "SETTINGS max_block_size=1, max_execution_time=0"
)


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: ch26.py CONFIG_DIR DATA_DIR", file=sys.stderr)
        return 2
    config_dir, data_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(data_dir, exist_ok=True)
    os.chdir(config_dir)

    from chdb import _chdb  # the engine; imported after chdir so it sees config.xml

    done = threading.Event()
    failure = []

    def serve() -> None:
        try:
            # The keep-alive query's format becomes every session's
            # default_format: TabSeparated, as clickhouse-server's HTTP
            # interface answers a query without FORMAT.
            _chdb.query(KEEPALIVE, "TabSeparated", path=data_dir)
        except Exception as e:  # the listeners or the data path failed
            failure.append(e)
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print("ch26: serving ClickHouse from", data_dir, flush=True)
    done.wait()
    if failure:
        print("ch26: Error:", failure[0], file=sys.stderr, flush=True)
        os._exit(1)
    # os._exit: the engine's threads would otherwise keep the process alive.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
