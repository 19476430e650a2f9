"""Session settings: local tuning only for a local master, whatever master is asked for (no Spark started)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from ackspec.pipeline.session import LOCAL_SETTINGS, SMALL_SETTINGS, is_local, session_settings


@pytest.mark.parametrize("master", ["local", "local[*]", "local[2]", "local[4,2]"])
def test_a_local_master_gets_the_small_machine_settings(master: str) -> None:
    settings = session_settings(master)
    assert is_local(master)
    assert {k: settings[k] for k in LOCAL_SETTINGS} == LOCAL_SETTINGS
    assert "-XX:+UseParallelGC" in settings["spark.driver.extraJavaOptions"]


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "yarn", "k8s://https://k:6443", "local-cluster[2,1,1024]"])
def test_a_cluster_master_keeps_its_own_sizing_and_reachable_driver(master: str) -> None:
    settings = session_settings(master, small=True)
    assert not is_local(master)
    for key in (*LOCAL_SETTINGS, *SMALL_SETTINGS):
        assert key not in settings, key  # no 4-partition cap, no loopback driver, no local heap size
    assert "UseParallelGC" not in settings["spark.driver.extraJavaOptions"]


def test_a_small_input_gets_the_start_up_settings_locally() -> None:
    settings = session_settings("local[*]", small=True)
    assert settings["spark.sql.shuffle.partitions"] == "1"
    assert settings["spark.sql.codegen.wholeStage"] == "false"
    assert "-XX:TieredStopAtLevel=1" in settings["spark.driver.extraJavaOptions"]


def test_the_report_module_loads_without_pyspark() -> None:
    code = "import sys, ackspec.pipeline.report; print(any(m.startswith('pyspark') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert done.stdout.strip() == "False"


ARROW_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
ARROW_RECORDS = "spark.sql.execution.arrow.maxRecordsPerBatch"


@pytest.mark.parametrize("master", ["local[*]", "local-cluster[2,1,1024]", "spark://10.0.0.5:7077"])
def test_every_master_lifts_the_arrow_byte_bound(master: str) -> None:
    """Spark measures the whole Arrow batch after every row to honour the byte bound (30% of the JVM's
    samples of the 10M check); the row bound alone keeps a batch small, on every kind of master."""
    for small in (False, True):
        assert int(session_settings(master, small=small)[ARROW_BYTES]) == 2**31 - 1


def test_the_live_session_keeps_a_row_bound_on_its_arrow_batches(spark: Any) -> None:
    assert int(spark.conf.get(ARROW_BYTES)) == 2**31 - 1
    assert 0 < int(spark.conf.get(ARROW_RECORDS)) <= 100_000
