"""The history checks as Spark DataFrame jobs: the same rules as checks_python, at scale.

Every rule is stated once in :mod:`ackspec.pipeline.anomalies` (kinds, requirements,
the ack modes that settle on delivery or acknowledge cumulatively, the reset
operations); this module computes it with joins and window functions so that a
soak test's hundreds of millions of operations can be checked on a cluster. The
histories are repartitioned once by ``(run, test)``: every window below partitions by
a superset of those columns, so Spark sorts within partitions instead of
shuffling again. ``tests/pipeline`` asserts that this module and
:func:`ackspec.pipeline.checks_python.check_histories` report the same anomalies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ackspec.pipeline.anomalies import (
    CUMULATIVE_MODES,
    DUPLICATES_ALLOWED,
    EXPECT_DELIVERED,
    INTENT_OP,
    REJECT_OUTCOMES,
    RESET_OPS,
    SETTLED_ON_DELIVERY,
    TOPIC_PREFIXES,
    VALUE_DEAD_LETTER,
    VALUE_EXPECT,
    VALUE_MAX_REDELIVERIES,
    VALUE_PRIORITY,
    Anomaly,
    AnomalyKind,
    CheckResult,
    SendCounts,
)

INF = 2**62
H = ["run", "test"]
MSG = ["dest", "prod", "seq"]
CONSUMER = ["process", "sub"]
UNBOUNDED = Window.unboundedPreceding


@dataclass(frozen=True, slots=True)
class SparkCheck:
    """The results of one check: anomalies and send counts as DataFrames (inputs already materialised)."""

    anomalies: DataFrame
    sends: DataFrame

    def collect(self) -> CheckResult:
        rows = self.anomalies.collect()
        found = sorted(
            Anomaly.make(AnomalyKind(r["kind"]), r["run"], r["test"], r["destination"], r["producer"], r["seq"],
                         list(r["operations"]), decisive=bool(r["decisive"]))
            for r in rows
        )
        counts = self.sends.collect()
        by = {r["status"]: r["n"] for r in counts}
        return CheckResult(tuple(found), SendCounts(by.get("confirmed", 0), by.get("failed", 0),
                                                     by.get("indeterminate", 0)))


def _is_topic(col: Column) -> Column:
    cond = F.lit(False)
    for prefix in TOPIC_PREFIXES:
        cond = cond | col.startswith(prefix)
    return cond


def _least(*cols: Column) -> Column:
    return F.least(*[F.coalesce(c, F.lit(INF)) for c in cols])


def _materialise(frame: DataFrame) -> DataFrame:
    """Persist ``frame`` (memory, spilling to disk) and compute it now, once, for every later job."""
    frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    frame.count()
    return frame


def check_dataframe(histories: DataFrame, *, repartition: bool = True) -> SparkCheck:
    """Build the check jobs over a DataFrame of history rows (schema of :mod:`ackspec.pipeline.schema`)."""
    # only the columns the rules use; the JSON ``value`` is parsed once here and dropped
    df = histories.select(
        "run", F.coalesce("test", F.lit("")).alias("test"), F.col("index").cast("long").alias("index"),
        "type", "op", "process", F.coalesce("destination", F.lit("")).alias("dest"),
        F.coalesce("subscription", F.lit("")).alias("sub"), F.coalesce("producer", F.lit("")).alias("prod"),
        F.col("seq").cast("long").alias("seq"), F.coalesce("ack_mode", F.lit("")).alias("ack_mode"), "transaction",
        "redelivered", "delivery_count", "outcome", "limit",
        F.get_json_object("value", f"$.{VALUE_MAX_REDELIVERIES}").cast("int").alias("mr"),
        F.coalesce(F.get_json_object("value", f"$.{VALUE_DEAD_LETTER}") == "true", F.lit(False)).alias("dead"),
        F.get_json_object("value", f"$.{VALUE_PRIORITY}").alias("priority"),
        F.when(F.col("op") == INTENT_OP, F.get_json_object("value", f"$.{VALUE_EXPECT}")).alias("intent"),
    )
    if repartition:
        df = df.repartition(*H)
    # materialise once (columnar cache, spills to disk): every job below scans it instead of
    # re-reading and re-shuffling the input; the cache keeps the (run, test) partitioning
    df = _materialise(df)

    # --- configuration and transactions ---------------------------------------------------
    max_red = (df.select(*H, "index", "mr")
               .where(F.col("mr").isNotNull())
               .groupBy(*H).agg(F.min(F.struct("index", "mr")).getField("mr").alias("test_mr")))
    committed = (df.where((F.col("op") == "commit") & (F.col("type") == "ok") & F.col("transaction").isNotNull())
                 .groupBy(*H, "transaction").agg(F.min("index").alias("commit_at")))
    rolled_back = (df.where(F.col("transaction").isNotNull()
                            & (((F.col("op") == "abort") & (F.col("type") == "ok"))
                               | ((F.col("op") == "commit") & (F.col("type") == "fail"))))
                   .select(*H, "transaction").distinct().withColumn("rolled_back", F.lit(True)))

    # --- send status ----------------------------------------------------------------------
    sends = (df.where(F.col("op").isin("send", "confirm") & F.col("seq").isNotNull())
             .join(committed, [*H, "transaction"], "left").join(rolled_back, [*H, "transaction"], "left"))
    is_confirm = (F.col("op") == "confirm") & (F.col("type") != "invoke")
    send_done = (F.col("op") == "send") & (F.col("type") != "invoke")
    send_ok = send_done & (F.col("type") == "ok")
    flags = sends.groupBy(*H, *MSG).agg(
        F.max(is_confirm.cast("int")).alias("has_confirm"),
        F.max((is_confirm & (F.col("type") == "ok")).cast("int")).alias("c_ok"),
        F.max((is_confirm & (F.col("type") == "info")).cast("int")).alias("c_info"),
        F.max((send_ok & (F.col("transaction").isNull() | F.col("commit_at").isNotNull())).cast("int"))
        .alias("s_conf"),
        F.max(((send_ok & F.col("transaction").isNotNull() & F.col("commit_at").isNull()
                & F.col("rolled_back").isNull()) | (send_done & (F.col("type") == "info"))).cast("int"))
        .alias("s_ind"),
        F.max(((send_ok & F.col("transaction").isNotNull() & F.col("commit_at").isNull()
                & F.col("rolled_back").isNotNull()) | (send_done & (F.col("type") == "fail"))).cast("int"))
        .alias("s_fail"),
        F.collect_list("index").alias("send_ops"),
    )
    status = flags.withColumn("status", F.when(
        F.col("has_confirm") == 1,
        F.when(F.col("c_ok") == 1, "confirmed").when(F.col("c_info") == 1, "indeterminate").otherwise("failed"),
    ).otherwise(
        F.when(F.col("s_conf") == 1, "confirmed").when(F.col("s_ind") == 1, "indeterminate")
        .when(F.col("s_fail") == 1, "failed").otherwise("indeterminate")
    )).select(*H, *MSG, "status", "send_ops")
    status = _materialise(status)

    # --- deliveries and their resets ------------------------------------------------------
    deliveries = df.where((F.col("op") == "receive") & (F.col("type") == "ok") & F.col("seq").isNotNull()).select(
        *H, "index", "process", "sub", *MSG, "ack_mode", "transaction", "redelivered", "delivery_count", "limit",
        "dead", "priority",
    )
    resets = df.where(F.col("op").isin(*RESET_OPS)
                      & ((F.col("type") == "ok") | F.col("op").isin("crash", "disconnect"))).select(
        *H, "process", F.col("index").alias("reset_index"))
    # reset_at: the first reset of the delivery's process after it, by one window over the deliveries
    # and the resets together (no join back: the deliveries carry all their columns through it)
    by_process = Window.partitionBy(*H, "process").orderBy(F.col("index").desc()).rowsBetween(UNBOUNDED, 0)
    deliveries = (deliveries.withColumn("reset_index", F.lit(None).cast("long"))
                  .withColumn("is_delivery", F.lit(True))
                  .unionByName(resets.select(*H, "process", F.col("reset_index").alias("index"), "reset_index",
                                             F.lit(False).alias("is_delivery")), allowMissingColumns=True)
                  .withColumn("reset_at", F.coalesce(F.min("reset_index").over(by_process), F.lit(INF)))
                  .where("is_delivery").drop("reset_index", "is_delivery"))

    # --- acknowledgements: target delivery of each ACK/NACK ----------------------------------
    settlements = (df.where(F.col("op").isin("ack", "nack") & (F.col("type") == "ok") & F.col("seq").isNotNull())
                   .join(committed, [*H, "transaction"], "left")
                   .where(F.col("transaction").isNull() | F.col("commit_at").isNotNull())
                   .select(*H, F.col("index").alias("s_index"), "process", "sub", "prod", "seq",
                           F.when(F.col("transaction").isNull(), F.col("index")).otherwise(F.col("commit_at"))
                           .alias("effective"), (F.col("op") == "ack").alias("is_ack")))
    d_keys = deliveries.select(*H, "process", "sub", "prod", "seq", F.col("index").alias("d_index"), "reset_at",
                               F.col("ack_mode").alias("d_mode"))
    targets = (settlements.join(d_keys, [*H, "process", "sub", "prod", "seq"], "inner")
               .where(F.col("d_index") < F.col("s_index"))
               .withColumn("rank", F.row_number().over(Window.partitionBy(*H, "s_index")
                                                       .orderBy(F.col("d_index").desc())))
               .where(F.col("rank") == 1)
               .withColumn("cumulative", F.col("d_mode").isin(*CUMULATIVE_MODES)))
    individual = (targets.where(~F.col("cumulative") & (F.col("s_index") < F.col("reset_at")))
                  .groupBy(*H, F.col("d_index").alias("index"))
                  .agg(F.min(F.when(F.col("is_ack"), F.col("effective"))).alias("ind_ack"),
                       F.min("effective").alias("ind_settle")))
    # cumulative: each delivery takes the earliest (by record index) ack covering it
    entries = targets.where("cumulative").select(
        *H, "process", "sub", F.col("d_index").alias("pos"), F.lit(0).alias("kind"),
        F.struct("s_index", "effective").alias("settle_s"),
        F.when(F.col("is_ack"), F.struct("s_index", "effective")).alias("ack_s"))
    cum_window = (Window.partitionBy(*H, "process", "sub").orderBy(F.col("pos").desc(), F.col("kind"))
                  .rowsBetween(UNBOUNDED, 0))
    empty_struct = F.lit(None).cast("struct<s_index:bigint,effective:bigint>")
    cumulative = (deliveries.select(*H, "process", "sub", F.col("index").alias("pos"), F.lit(1).alias("kind"),
                                    empty_struct.alias("settle_s"), empty_struct.alias("ack_s"))
                  .unionByName(entries)
                  .withColumn("first_settle", F.min("settle_s").over(cum_window))
                  .withColumn("first_ack", F.min("ack_s").over(cum_window))
                  .where(F.col("kind") == 1)
                  .select(*H, F.col("pos").alias("index"), "first_settle", "first_ack"))
    deliveries = (deliveries.join(individual, [*H, "index"], "left").join(cumulative, [*H, "index"], "left")
                  .join(committed, [*H, "transaction"], "left"))
    tx_ack = F.when(F.col("commit_at").isNotNull() & (F.col("index") < F.col("commit_at"))
                    & (F.col("commit_at") < F.col("reset_at")), F.col("commit_at"))
    cum_ack = F.when(F.col("first_ack.s_index") < F.col("reset_at"), F.col("first_ack.effective"))
    cum_settle = F.when(F.col("first_settle.s_index") < F.col("reset_at"), F.col("first_settle.effective"))
    deliveries = (deliveries
                  .withColumn("ack_at", _least(F.col("ind_ack"), cum_ack, tx_ack))
                  .withColumn("settle_at", F.when(F.col("ack_mode").isin(*SETTLED_ON_DELIVERY), F.col("index"))
                              .otherwise(_least(F.col("ind_settle"), cum_settle, tx_ack, F.col("reset_at"))))
                  .drop("ind_ack", "ind_settle", "first_ack", "first_settle", "commit_at"))
    deliveries = _materialise(deliveries)

    anomalies: list[DataFrame] = []

    def emit(frame: DataFrame, kind: AnomalyKind | Column, ops: Column, decisive: Column | None = None) -> None:
        anomalies.append(frame.select(
            "run", "test", (F.lit(str(kind)) if isinstance(kind, AnomalyKind) else kind).alias("kind"),
            F.when(F.col("dest") == "", None).otherwise(F.col("dest")).alias("destination"),
            F.when(F.col("prod") == "", None).otherwise(F.col("prod")).alias("producer"),
            "seq", ops.alias("operations"), (F.lit(False) if decisive is None else decisive).alias("decisive")))

    # --- in-flight bound ------------------------------------------------------------------------
    limits = df.where(F.col("op").isin("subscribe", "flow") & F.col("limit").isNotNull()
                      & (F.col("type") != "fail")).select(*H, "process", "sub", "index", "limit")
    by_consumer = Window.partitionBy(*H, *CONSUMER).orderBy("pos", "order").rowsBetween(UNBOUNDED, 0)
    events = (
        deliveries.select(*H, *CONSUMER, F.col("index").alias("pos"), F.lit(1).alias("order"),
                          F.when(F.col("settle_at") > F.col("index"), 1).otherwise(0).alias("delta"),
                          F.lit(None).cast("struct<index:bigint,limit:int>").alias("bound"),
                          "dest", "prod", "seq")
        .unionByName(deliveries.where((F.col("settle_at") > F.col("index")) & (F.col("settle_at") < INF))
                     .select(*H, *CONSUMER, F.col("settle_at").alias("pos"), F.lit(0).alias("order"),
                             F.lit(-1).alias("delta"), F.lit(None).cast("struct<index:bigint,limit:int>")
                             .alias("bound"), "dest", "prod", "seq"))
        .unionByName(limits.select(*H, *CONSUMER, F.col("index").alias("pos"), F.lit(0).alias("order"),
                                   F.lit(0).alias("delta"), F.struct("index", "limit").alias("bound"),
                                   F.lit("").alias("dest"), F.lit("").alias("prod"),
                                   F.lit(None).cast("long").alias("seq")))
        .withColumn("outstanding", F.sum("delta").over(by_consumer))
        .withColumn("bound", F.last("bound", ignorenulls=True).over(by_consumer))
        .where((F.col("order") == 1) & F.col("bound").isNotNull() & (F.col("bound.limit") > 0)
               & (F.col("outstanding") > F.col("bound.limit")))
    )
    emit(events, AnomalyKind.IN_FLIGHT, F.array(F.col("bound.index"), F.col("pos")))

    # --- duplicates and delivery counts, per scope -------------------------------------------
    normal = deliveries.where(~F.col("dead")).withColumn(
        "scope", F.when(_is_topic(F.col("dest")), F.concat_ws("/", "process", "sub")).otherwise(F.lit("")))
    scope_w = Window.partitionBy(*H, "scope", *MSG).orderBy("index")
    scope_all = Window.partitionBy(*H, "scope", *MSG)
    scoped = (normal
              .withColumn("k", F.row_number().over(scope_w) - 1)
              .withColumn("acked", F.min(F.struct("ack_at", "index")).over(scope_all))
              .withColumn("prev_index", F.lag("index").over(scope_w))
              .withColumn("prev_count", F.last("delivery_count", ignorenulls=True)
                          .over(scope_w.rowsBetween(UNBOUNDED, -1)))
              .withColumn("prev_count_index", F.last(F.when(F.col("delivery_count").isNotNull(), F.col("index")),
                                                     ignorenulls=True).over(scope_w.rowsBetween(UNBOUNDED, -1))))
    repeat = (F.col("k") > 0) & ~F.col("ack_mode").isin(*DUPLICATES_ALLOWED)
    after_ack = repeat & (F.col("acked.ack_at") < F.col("index"))
    unmarked = (F.col("redelivered") == F.lit(False)) & (F.col("delivery_count").isNull()
                                                         | (F.col("delivery_count") <= 1))
    count = F.col("delivery_count")
    bad_start = F.coalesce(count.isNotNull() & ((count < 1) | ((F.col("k") == 0) & (count > 1)
                                                               & (F.col("redelivered") == F.lit(False)))),
                           F.lit(False))
    decrease = count.isNotNull() & ~bad_start & F.col("prev_count").isNotNull() & (count < F.col("prev_count"))

    def found(condition: Column, kind: AnomalyKind, ops: Column) -> Column:
        return F.when(condition, F.struct(F.lit(str(kind)).alias("kind"), ops.cast("array<bigint>").alias("ops")))

    # the four per-scope checks in one pass over one window sort: each row yields 0..n anomalies
    per_scope = scoped.select("*", F.explode(F.filter(F.array(
        found(after_ack, AnomalyKind.DUPLICATE_AFTER_ACK,
              F.array(F.col("acked.index"), F.col("acked.ack_at"), F.col("index"))),
        found(repeat & ~after_ack & unmarked, AnomalyKind.DUPLICATE, F.array(F.col("prev_index"), F.col("index"))),
        found(bad_start, AnomalyKind.DELIVERY_COUNT_START, F.array(F.col("index"))),
        found(decrease, AnomalyKind.DELIVERY_COUNT_DECREASE, F.array(F.col("prev_count_index"), F.col("index"))),
    ), lambda a: a.isNotNull())).alias("found"))
    emit(per_scope, F.col("found.kind"), F.col("found.ops"))

    # --- order per consumer, destination, producer, priority ------------------------------
    first_on_consumer = Window.partitionBy(*H, *CONSUMER, *MSG).orderBy("index")
    first_time = ((F.coalesce(F.col("redelivered"), F.lit(False)) == F.lit(False))
                  & (count.isNull() | (count <= 1)))
    stream = Window.partitionBy(*H, *CONSUMER, "dest", "prod", "priority").orderBy("index").rowsBetween(UNBOUNDED, -1)
    ordered = (deliveries.where(~F.col("dead"))
               .withColumn("nth", F.row_number().over(first_on_consumer))
               .where((F.col("nth") == 1) & first_time)
               .withColumn("highest", F.max(F.struct("seq", "index")).over(stream))
               .where(F.col("seq") < F.col("highest.seq")))
    emit(ordered, AnomalyKind.ORDER, F.array(F.col("highest.index"), F.col("index")))

    # --- dead-lettering (queues) ------------------------------------------------------------------
    rejected = (df.where((F.col("op") == "nack") & (F.col("type") == "ok") & F.col("seq").isNotNull()
                         & F.col("outcome").isin(*REJECT_OUTCOMES))
                .select(*H, *MSG).distinct().withColumn("rejected", F.lit(True)))
    queue = deliveries.where(~_is_topic(F.col("dest")))
    per_msg = Window.partitionBy(*H, *MSG, "dead").orderBy("index")
    dead_limit = Window.partitionBy(*H, *MSG)
    dlq = (queue.join(max_red, H, "left")
           .withColumn("m", F.coalesce(F.col("test_mr"),
                                       F.min(F.when(F.col("dead"), F.col("limit"))).over(dead_limit)))
           .where(F.col("m").isNotNull())
           .withColumn("nth", F.row_number().over(per_msg))
           .groupBy(*H, *MSG).agg(
               F.sum((~F.col("dead")).cast("int")).alias("n"),
               F.first("m").alias("m"),
               F.min(F.when(F.col("dead"), F.col("index"))).alias("first_dead"),
               F.min(F.when(~F.col("dead") & (F.col("nth") == F.col("m") + 2), F.col("index"))).alias("extra"))
           .join(rejected, [*H, *MSG], "left"))
    beyond = F.col("n") > F.col("m") + 1
    early = ~beyond & F.col("first_dead").isNotNull() & (F.col("n") < F.col("m") + 1) & F.col("rejected").isNull()
    emit(dlq.where(beyond | early), AnomalyKind.DEAD_LETTER,
         F.when(beyond, F.array(F.col("extra"))).otherwise(F.array(F.col("first_dead"))))

    # --- lost ---------------------------------------------------------------------------------------
    # decisive when a ``delivered`` intent covers the message; not reported when another intent
    # (left, dropped) covers it. Intents are few (one or a handful per test): broadcast them.
    delivered = deliveries.select(*H, *MSG).distinct().withColumn("delivered", F.lit(True))
    lost = (status.where(F.col("status") == "confirmed").join(delivered, [*H, *MSG], "left")
            .where(F.col("delivered").isNull()).drop("delivered"))
    intents = F.broadcast(df.where((F.col("op") == INTENT_OP) & (F.col("type") == "ok")).select(
        F.col("run").alias("i_run"), F.col("test").alias("i_test"), F.col("index").alias("i_index"),
        F.when(F.col("dest") != "", F.col("dest")).alias("i_dest"),
        F.when(F.col("prod") != "", F.col("prod")).alias("i_prod"), F.col("seq").alias("i_seq"),
        F.coalesce(F.col("intent") == EXPECT_DELIVERED, F.lit(False)).alias("expects")))
    covers = ((F.col("run") == F.col("i_run")) & (F.col("test") == F.col("i_test"))
              & (F.col("i_dest").isNull() | (F.col("i_dest") == F.col("dest")))
              & (F.col("i_prod").isNull() | (F.col("i_prod") == F.col("prod")))
              & (F.col("i_seq").isNull() | (F.col("i_seq") == F.col("seq"))))
    lost = (lost.join(intents, covers, "left")
            .groupBy(*H, *MSG).agg(
                F.first("send_ops").alias("send_ops"),
                F.max(F.col("i_index").isNotNull() & ~F.col("expects")).alias("exempt"),
                F.min(F.when(F.col("expects"), F.col("i_index"))).alias("expected_by"))
            .where(~F.coalesce(F.col("exempt"), F.lit(False))))
    emit(lost, AnomalyKind.LOST,
         F.when(F.col("expected_by").isNull(), F.col("send_ops"))
         .otherwise(F.concat(F.col("send_ops"), F.array(F.col("expected_by")))),
         F.col("expected_by").isNotNull())

    result = anomalies[0]
    for frame in anomalies[1:]:
        result = result.unionByName(frame)
    return SparkCheck(result, status.groupBy("status").agg(F.count(F.lit(1)).alias("n")))


def check_histories_spark(histories: DataFrame) -> CheckResult:
    """Run the checks and collect anomalies and send counts to the driver."""
    return check_dataframe(histories).collect()


def unpersist(obj: Any) -> None:  # pragma: no cover - convenience for long sessions
    obj.unpersist()
