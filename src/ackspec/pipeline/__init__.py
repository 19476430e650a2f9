"""The data pipeline: histories and results of many runs become anomalies, verdicts and a report.

Modules, one concept each:

- ``layout``         the run directory (what ``ackspec run`` writes, what ``ackspec report`` reads)
- ``anomalies``      what a history check can find: kinds, requirements, the rules' vocabulary
- ``checks_python``  the checks in one process (``check_history(records)``), importable without Spark
- ``checks_spark``   the same checks as one Spark job (one shuffle by history), for histories of any size
- ``columnar``       history rows straight from Arrow batches, cut into whole histories
- ``synthetic``      generated histories with anomalies injected at known places
- ``schema``         the Spark/Parquet schema of history records; reading and converting histories
- ``session``        the SparkSession: quiet ``local[*]`` sized for a small machine, or any ``--master``
- ``report``         the traceability report (matrix, coverage, history over runs), ``build_report``
- ``report_html``    the report as one self-contained HTML page
- ``allure``         allure's environment and categories files
"""
