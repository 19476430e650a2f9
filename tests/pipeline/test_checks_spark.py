"""The Spark checks find exactly what the generator injected, and agree with the single-process checker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from ackspec.history.anomalies import AnomalyKind
from ackspec.history.checks import check_histories
from ackspec.pipeline.checks_spark import SparkCheck, check_dataframe, check_histories_spark
from ackspec.pipeline.schema import read_run, records_dataframe, write_parquet
from ackspec.pipeline.synthetic import generate_suite
from ackspec.results.layout import RunDir


def test_spark_and_python_find_every_injected_anomaly_and_nothing_else(spark: Any) -> None:
    histories = list(generate_suite(48, seed=20261122, anomaly_rate=0.75))
    records = [r for h in histories for r in h.records]
    expected = sorted(a for h in histories for a in h.expected)
    assert {a.kind for a in expected} == set(AnomalyKind)  # every kind is exercised
    python = check_histories(records)
    found = check_histories_spark(records_dataframe(spark, records))
    assert list(python.anomalies) == expected
    assert list(found.anomalies) == expected
    assert found.sends == python.sends
    assert python.sends.indeterminate > 0  # indeterminate sends were generated, and counted apart


@settings(max_examples=2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_spark_agrees_with_python_on_random_suites(spark: Any, seed: int) -> None:
    note(f"replay: generate_suite(12, seed={seed}, anomaly_rate=0.5)")
    histories = list(generate_suite(12, seed=seed, anomaly_rate=0.5))
    records = [r for h in histories for r in h.records]
    assert check_histories_spark(records_dataframe(spark, records)).anomalies == check_histories(records).anomalies


def test_parquet_round_trip_keeps_every_anomaly(spark: Any, tmp_path: Path) -> None:
    histories = list(generate_suite(8, seed=5, anomaly_rate=1.0, run="run-a", target="stomp://x:1"))
    records = [r for h in histories for r in h.records]
    run = RunDir(tmp_path)
    write_parquet(records_dataframe(spark, records), run.histories_parquet)
    assert (run.histories_parquet / "run=run-a").is_dir()
    df = read_run(spark, run)
    assert df is not None
    assert df.count() == len(records)
    assert list(check_histories_spark(df).anomalies) == sorted(a for h in histories for a in h.expected)


def test_histories_cut_across_arrow_batches_are_checked_whole(spark: Any) -> None:
    # the workers read each partition as Arrow batches of N rows: with N=7 nearly every history spans
    # several batches, and one batch holds the end of one history and the start of the next
    histories = list(generate_suite(16, seed=11, anomaly_rate=0.75))
    records = [r for h in histories for r in h.records]
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    spark.conf.set(key, "7")
    try:
        found = check_histories_spark(records_dataframe(spark, records))
    finally:
        spark.conf.unset(key)
    python = check_histories(records)
    assert found.anomalies == python.anomalies == tuple(sorted(a for h in histories for a in h.expected))
    assert found.sends == python.sends


def test_an_unknown_operation_is_counted_per_run_not_dropped(spark: Any) -> None:
    histories = list(generate_suite(2, seed=1))
    records = [r for h in histories for r in h.records]
    df = records_dataframe(spark, records).withColumn(
        "op", F.when(F.col("index") == 3, F.lit("bogus")).otherwise(F.col("op")))
    found = check_histories_spark(df)
    assert [(p.run, p.records, p.detail) for p in found.problems] == [
        ("synthetic-run", 2, "history record with unknown op 'bogus'")]  # index 3 of each of the two tests
    assert check_histories_spark(records_dataframe(spark, records)).problems == ()


def test_malformed_json_lines_are_reported_per_run_and_the_rest_is_checked(spark: Any, tmp_path: Path) -> None:
    runs = {}
    for name in ("run-a", "run-b"):
        histories = list(generate_suite(3, seed=7, anomaly_rate=1.0, run=name))
        run = RunDir(tmp_path / name)
        run.histories.mkdir(parents=True)
        for h in histories:
            lines = [r.to_json() for r in h.records]
            run.history_path(h.records[0].test or "t").write_text("\n".join(lines) + "\n", encoding="utf-8")
        runs[name] = (run, histories)
    victim = runs["run-b"][0].history_files()[0]
    victim.write_text(victim.read_text() + "{not json\n" + '{"v": 7, "run": "run-b", "index": 1}\n')
    frames = [read_run(spark, str(run.root)) for run, _ in runs.values()]
    found = check_histories_spark(frames[0].unionByName(frames[1]))
    # the line without a run is counted under its file, the other under its run
    problems = {p.run.rsplit("/", 1)[-1]: p for p in found.problems}
    assert set(problems) == {victim.name, "run-b"}
    assert all(p.source.endswith(victim.name) and p.records == 1 for p in found.problems)
    assert problems[victim.name].detail == "malformed history line: {not json"
    assert problems["run-b"].detail == "history schema version 7 is not supported (expected 1)"
    assert list(found.anomalies) == sorted(a for _, hs in runs.values() for h in hs for a in h.expected)


def test_histories_cut_across_input_partitions_are_detected_and_checked_whole(spark: Any) -> None:
    # the partition-wise plan is right only when every history is one stretch of one input partition, in
    # index order: round-robin rows cut nearly every history across partitions, and one partition of
    # them interleaves the histories; the check must notice both and group them. Rows hashed by history
    # and sorted keep them whole, and the partition-wise rows then stand
    histories = list(generate_suite(16, seed=23, anomaly_rate=0.75))
    records = [r for h in histories for r in h.records]
    python = check_histories(records)
    df = records_dataframe(spark, records)
    layouts = ((df.repartition(3), True), (df.repartition(3).coalesce(1), True),
               (df.repartition(3, "run", "test").sortWithinPartitions("run", "test", "index"), False))
    for layout, cut in layouts:
        check = check_dataframe(layout)
        assert (SparkCheck.split_histories(check.partition_wise()) > 0) is cut
        found = check.collect()
        assert found.anomalies == python.anomalies == tuple(sorted(a for h in histories for a in h.expected))
        assert found.sends == python.sends
