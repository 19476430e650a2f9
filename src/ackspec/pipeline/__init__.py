"""The data pipeline: histories and results of many runs become anomalies, verdicts and a report.

The checks over one history live a layer below, in :mod:`ackspec.history` (``anomalies``, ``facts``,
``rules``, ``checks``: the conformance harness runs them too), and the run directory's layout in
:mod:`ackspec.results.layout`. Modules here, one concept each:

- ``checks_spark``   the rules of :mod:`ackspec.history.rules` as one Spark job
                     (``groupBy(run, bucket).applyInArrow``), any master
- ``columnar``       history rows straight from Arrow columns (what the Spark workers check)
- ``synthetic``      generated histories with anomalies injected at known places
- ``schema``         the Spark/Parquet schema of history records; reading them by URI, bad records flagged
- ``session``        the SparkSession: any master URL; local tuning only for ``local[...]``
- ``submit``         the ``spark-submit`` application: run directories in, anomaly rows out, by URI
- ``report``         the traceability report (matrix, coverage, history over runs), ``build_report``
- ``report_html``    the report as one self-contained HTML page (the Jinja2 template in ``templates/``)
- ``allure``         allure's environment and categories files
"""
