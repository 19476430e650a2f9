"""The data pipeline: histories and results of many runs become anomalies, verdicts and a report.

Modules, one concept each:

- ``layout``         the run directory (what ``ackspec run`` writes, what ``ackspec report`` reads)
- ``anomalies``      what a history check can find: kinds, requirements, the rules' vocabulary
- ``facts``          one history indexed once (sends, deliveries, settlements, resets) for the rules
- ``rules``          the rules, one small named function each (``RULES``), shared by both engines
- ``checks_python``  the checks in one process (``check_history(records)``), importable without Spark
- ``checks_spark``   the same rules as one Spark job (``groupBy(run, bucket).applyInArrow``), any master
- ``columnar``       history rows straight from Arrow columns (what the Spark workers check)
- ``synthetic``      generated histories with anomalies injected at known places
- ``schema``         the Spark/Parquet schema of history records; reading them by URI, bad records flagged
- ``session``        the SparkSession: any master URL; local tuning only for ``local[...]``
- ``submit``         the ``spark-submit`` application: run directories in, anomaly rows out, by URI
- ``report``         the traceability report (matrix, coverage, history over runs), ``build_report``
- ``report_html``    the report as one self-contained HTML page
- ``allure``         allure's environment and categories files
"""
