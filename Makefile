# PGXS-style entry points for pg_scoot (thin wrappers; the work is done by cargo-pgrx and scripts/).
#
#   make                 release build + package into target/release/pg_scoot-pg15/ (no install)
#   make install         release build installed into $(PG_CONFIG)'s directories (scripts/install.sh:
#                        like PGXS, replaces files instead of overwriting them, so running servers live on)
#   make installcheck    pg_regress (sql/) + isolation specs against a RUNNING server (PGHOST/PGPORT)
#   make check           the full test run (= scripts/test.sh; what CI runs)
#   make demo            pgbench TPC-B on scoot tables in a throw-away cluster
#   make bench           heap vs scoot pgbench comparison -> bench/results/latest.{md,json}
#   make bench-olap      OLAP snapshot benchmarks -> bench/results/olap.{md,json} + plots
#   make bench-analytic  analytic scans heap vs scoot -> bench/results/analytic.{md,json}
#   make bench-tpch      TPC-H SF1, 22 queries, heap vs scoot -> bench/results/tpch.{md,json}
#   make bench-ch        CH-benCHmark (go-tpc ch: TPC-C + 22 analytic queries) -> bench/results/ch.{md,json}
#   make bench-tpcc      TPC-C alone (the same script, no analytic thread) -> bench/results/tpcc.{md,json}
#   make bench-load      bulk loads (COPY, INSERT ... SELECT) heap vs scoot -> bench/results/load.{md,json}
#   make bench-arrow     Arrow export of TPC-H lineitem vs ADBC/ConnectorX/psycopg -> bench/results/arrow.{md,json}
#   make bench-floor     pgbench TPC-B on heap and scoot next to the no-storage floor -> bench/results/oltp_floor.{md,tsv}
#   make bench-durability  recovery time (image + WAL, WAL only, clean restart) and image cost -> bench/results/durability.{md,json}
#   make setup           install the toolchain / packages (scripts/setup.sh)
#   make cluster-start / cluster-stop   a persistent throw-away cluster in /tmp/pg_scoot_cluster
#
# PG_CONFIG defaults to pg_config on PATH, else /usr/lib/postgresql/15/bin/pg_config.

PG_CONFIG ?= $(shell command -v pg_config 2>/dev/null || echo /usr/lib/postgresql/15/bin/pg_config)
export PG_CONFIG
CARGO ?= cargo

.PHONY: all package install installcheck check test demo bench bench-olap bench-analytic bench-tpch bench-ch bench-tpcc bench-load bench-arrow bench-durability bench-floor setup cluster-start cluster-stop

all: package

package:
	$(CARGO) pgrx package --pg-config "$(PG_CONFIG)"

install:
	bash scripts/install.sh

installcheck:
	bash scripts/installcheck.sh

check test:
	bash scripts/test.sh

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

bench-olap:
	bash scripts/olap_bench.sh

bench-analytic:
	bash scripts/analytic_bench.sh

bench-tpch:
	bash scripts/tpch_bench.sh

bench-ch:
	bash scripts/ch_bench.sh

bench-tpcc:
	CH_AP_THREADS=0 CH_RESULT=tpcc bash scripts/ch_bench.sh

bench-load:
	bash scripts/load_bench.sh

bench-arrow:
	bash scripts/arrow_bench.sh

bench-durability:
	bash scripts/durability_bench.sh

bench-floor:
	bash scripts/oltp_floor.sh

setup:
	bash scripts/setup.sh

cluster-start:
	bash scripts/cluster.sh start

cluster-stop:
	bash scripts/cluster.sh stop
