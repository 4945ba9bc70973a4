#!/usr/bin/env python3
"""Reads a unified diff of one regression test's output (plain scans vs the ScootScan custom scan)
on stdin; exits 0 if every changed line belongs to a query plan, 1 (printing the first offending
lines) otherwise.

A changed line is plan text when it is a plan node, plan property or EXPLAIN framing: node names
("Custom Scan (ScootScan)", "Seq Scan", joins, sorts, aggregates, ...), properties ("Filter:",
"Scoot Columns:", "Output:", ...), the "QUERY PLAN" header and its dashes, "(N rows)" footers of
EXPLAIN results, the JSON/XML/YAML keys EXPLAIN prints, and the column headers of the core suite's
plan-printing helper functions (explain_filter, explain_sq_limit, ...). Result rows, errors and notices are
never plan text, so a wrong answer or a new error is reported. The echo of an EXPLAIN statement that
the diff shows both removed and added (plans of other lengths around it move it) is no change."""
import re
import sys

PLAN = re.compile(
    r"(Scan\b|Scoot Columns|QUERY PLAN|^\s*-+\s*$|^\s*\(\d+ rows?\)\s*$|^\s*->|"
    r"^\s*(Filter|Output|Sort Key|Group Key|Hash Cond|Merge Cond|Join Filter|Index Cond|Recheck Cond|"
    r"TID Cond|One-Time Filter|Presorted Key|Workers Planned|Workers Launched|Rows Removed by Filter|"
    r"Cache Key|Cache Mode|Hits|Subplans Removed|Sampling|Run Condition|Replaces|Heap Fetches|"
    r"Partial Mode|Strategy|Parallel Aware|Async Capable|Custom Plan Provider|Relation Name|Alias|"
    r"Node Type|Parent Relationship|Plans|Plan|Scoot Columns Read|Scoot Columns Total|Schema|Single Copy|"
    r"Inner Unique|Join Type|Startup Cost|Total Cost|Plan Rows|Plan Width|Actual [A-Za-z ]+|Workers|"
    r"Sort Method|Sort Space [A-Za-z]+|Peak Memory Usage|Batches|Buckets|Memory Usage)\b|"
    r"^\s*[\[\]{}],?\s*\+?$|^\s*\"[A-Za-z /-]+\": |^\s*</?[A-Za-z-]+[\s>]|"
    r"^\s*(- )?(?!(ERROR|WARNING|NOTICE|DETAIL|HINT|CONTEXT|LINE \d+|INFO|STATEMENT|QUERY):)[A-Z][A-Za-z -]*:( |\s*\+?$)|"
    r"^\s*explain_\w+\s*$|\b(Hash|Merge)( \w+)? Join\b|\bNested Loop( \w+)?( Join)?\b|"
    r"\b(Aggregate|HashAggregate|GroupAggregate|Gather|Gather Merge|Sort|Incremental Sort|Hash|"
    r"Hash Join|Merge Join|Nested Loop|Materialize|Memoize|Append|Merge Append|Result|Unique|Limit|"
    r"WindowAgg|SubPlan \d+|InitPlan \d+|Subquery Scan|ProjectSet|LockRows|SetOp|HashSetOp|"
    r"Recursive Union|Group)\b)"
)

# the echo of an EXPLAIN statement: when plans of different lengths follow one another, the diff
# may align the statements differently and show the same echo as removed and as added
ECHO = re.compile(r"^\s*explain\b", re.IGNORECASE)

bad = []
for line in sys.stdin:
    line = line.rstrip("\n")
    if line.startswith(("+++", "---", "@@")) or not line[:1] in "+-":
        continue
    body = line[1:]
    if not body.strip() or PLAN.search(body):
        continue
    bad.append(line)
# an EXPLAIN echo removed and added alike is a moved line, not a changed one
for line in [l for l in bad if l[0] == "-" and ECHO.search(l[1:])]:
    if line in bad and "+" + line[1:] in bad:
        bad.remove(line)
        bad.remove("+" + line[1:])
if bad:
    for l in bad[:5]:
        print("   ", l[:160])
    sys.exit(1)
