"""The Sources: where a hop's rows come from, one per thing a hop reads
(:data:`spark_jobs.engine.hops.SOURCES`): the landing folder, a Kafka topic, one
upstream table, several. Each gives ``stream()`` for the run-once and always-on query,
``read(start_ms, end_ms)`` for a backfill and ``missing()``, what is not there yet to read
(:class:`spark_jobs.engine.contracts.Source`)."""

from __future__ import annotations

from spark_jobs.engine.contracts import HopContext
from spark_jobs.engine.tables import range_predicate, table_exists
from spark_jobs.logs import checkpoint_log, delta_log
from spark_jobs.logs.fs import filesystem
from spark_jobs.transforms.stamps import streamed_rows


def parsed(lines, fmt):
    """An ingest hop's lines (``value``, ``_source_file``), parsed by the platform when the hop
    declares a ``format``; else as they are, for its transform to parse."""
    if fmt is None:
        return lines
    from spark_jobs.transforms.formats import parse

    return parse(lines, fmt)


# The observed metric of a stream that reads whole files: the rows (lines) its batch read.
LINES_READ = "lines_read"

# Spark's binaryFile source's columns (a stream must be told them).
BINARY_FILE_SCHEMA = "path STRING, modificationTime TIMESTAMP, length BIGINT, content BINARY"

# How many files a Delta stream's batch admits when maxFilesPerTrigger is not set (Delta's default).
DELTA_FILES_PER_BATCH = 1000


class LandingFiles:
    """The ingest hop's landing folder, line by line, with each line's source file. A CSV hop's
    files are read whole (``binaryFile``), so each line knows its file's header; the file
    source logs the same paths either way."""

    def __init__(self, run: HopContext):
        self.run = run

    def _lines(self, streaming: bool, max_files_per_trigger: int | None = None):
        from pyspark.sql import functions as F

        lake, hop = self.run.lake, self.run.hop
        landing = lake.landing_of(hop)
        fs = filesystem(landing)
        fs.makedirs(landing, exist_ok=True)
        reader = self.run.spark.readStream if streaming else self.run.spark.read
        if streaming and max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        # A backfill reads the archive too (what retention.landing moved there), each line still
        # named by the landing path its rows were streamed from.
        archive = lake.archive_of(hop)
        folders = landing if streaming or not fs.exists(archive) else [landing, archive]
        folder = lake.spec.landing_of(hop).strip("/")
        source = F.replace(
            F.col("_metadata.file_path"), F.lit(f"/_archive/{folder}/"), F.lit(f"/{folder}/")
        )
        fmt = hop.format
        if fmt is not None and fmt.reads_files_whole:
            from spark_jobs.transforms.formats import file_lines

            files = reader.format("binaryFile").schema(BINARY_FILE_SCHEMA).load(folders)
            lines = file_lines(files.select("content", source.alias("_source_file")), fmt)
            if streaming:  # the source's own count is of files: "rows in" are the lines read
                lines = lines.observe(LINES_READ, F.count(F.lit(1)).alias("rows"))
        else:
            lines = (
                reader.format("text").load(folders).select("value", source.alias("_source_file"))
            )
        return parsed(lines, fmt)

    def stream(self, max_files_per_trigger: int | None = None):
        return self._lines(True, max_files_per_trigger)

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """Every line of every file: lines carry no trustworthy time until parsed, so the ingest
        sink applies the range to the parsed rows. (Landing files have no versions.)"""
        return self._lines(False)

    def read_scope(self, lines) -> str | None:
        """The rows of what ``lines`` (a backfill's read) came from, as a predicate on
        ``_source_file``: the files read (None: none)."""
        files = sorted({row[0] for row in lines.select("_source_file").distinct().collect()})
        return (
            "_source_file IN ("
            + ", ".join("'" + path.replace("'", "''") + "'" for path in files)
            + ")"
            if files
            else None
        )

    def missing(self) -> str | None:
        return None


# A part of a record's address: -3 its topic, -2 its partition, -1 its offset.
_ADDRESS_PART = "element_at(split(_source_file, '/'), %d)"


def _address_part(index: int):
    from pyspark.sql import functions as F

    return F.expr(_ADDRESS_PART % index)


def record_address(topic, partition, offset):
    """A Kafka record's address, ``kafka://<topic>/<partition>/<offset>``: what a topic-fed hop's
    rows carry as ``_source_file``, as a landing file's rows carry its path
    (lineage, quarantine)."""
    from pyspark.sql import functions as F

    return F.concat(
        F.lit("kafka://"),
        topic,
        F.lit("/"),
        partition.cast("string"),
        F.lit("/"),
        offset.cast("string"),
    )


def avro_line(value, avro):
    """A record's Avro ``value`` as the JSON line of its record (``to_json``), or, when it does not
    decode with the hop's schema (or lacks Confluent's header where the hop expects one), a line
    no JSON parser takes: ``undecodable Avro value: <its bytes in hex>``, which the hop's parse
    quarantines with the bytes kept. Spark's permissive ``from_avro`` makes a record of nulls of
    what it cannot decode: a record whose fields that cannot be null are null (every field, when
    all can) did not decode."""
    import json
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    from spark_jobs.model.kafka import CONFLUENT_HEADER_BYTES

    body, framed = value, F.lit(True)
    if avro.confluent:
        body = value.substr(CONFLUENT_HEADER_BYTES + 1, 2**31 - 1)
        framed = (F.length(value) >= CONFLUENT_HEADER_BYTES) & (F.hex(value.substr(1, 1)) == "00")
    decoded = from_avro(body, avro.schema, {"mode": "PERMISSIVE"})
    fields = json.loads(avro.schema)["fields"]
    required = [
        field["name"]
        for field in fields
        if not (isinstance(field["type"], list) and "null" in field["type"])
    ]
    if required:
        whole = reduce(lambda a, b: a & b, [decoded[name].isNotNull() for name in required])
    else:
        whole = reduce(lambda a, b: a | b, [decoded[field["name"]].isNotNull() for field in fields])
    return F.when(framed & decoded.isNotNull() & whole, F.to_json(decoded)).otherwise(
        F.concat(F.lit("undecodable Avro value: "), F.hex(value))
    )


class KafkaTopic:
    """An ingest hop's Kafka topic, record by record: ``value`` (the record's value as UTF-8 text,
    the line a transform parses) and ``_source_file`` (the record's address,
    :func:`record_address`).

    The stream starts at the hop's ``starting_offsets`` and takes at most
    ``max_offsets_per_trigger`` records a batch; each batch's end offsets are logged in the
    checkpoint, which is what a rollback rewinds and a replay reads again. Records the broker no
    longer holds fail the run (``failOnDataLoss``): they are never skipped silently. A backfill
    reads from where the range's records begin (:meth:`read`); the ingest sink keeps its rows.
    """

    def __init__(self, run: HopContext):
        self.run = run

    def _records(self, reader):
        from spark_jobs.model.kafka import KafkaConnection

        hop = self.run.hop
        frame = (
            reader.format("kafka")
            .options(**KafkaConnection.from_env().spark_options())
            .option(*hop.kafka.subscription)
            .option("failOnDataLoss", "true")
            .load()
        )
        value = (
            frame["value"].cast("string")
            if hop.kafka.avro is None
            else avro_line(frame["value"], hop.kafka.avro)
        )
        return parsed(
            frame.select(
                value.alias("value"),
                record_address(frame["topic"], frame["partition"], frame["offset"]).alias(
                    "_source_file"
                ),
            ),
            hop.format,
        )

    def stream(self, max_files_per_trigger: int | None = None):
        from spark_jobs.control.topics import check_nothing_lost

        hop = self.run.hop
        # Spark would fail on them too, with less to go on
        check_nothing_lost(self.run.state)
        reader = self.run.spark.readStream.option("startingOffsets", hop.kafka.starting_offsets)
        if hop.kafka.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", int(hop.kafka.max_offsets_per_trigger))
        return self._records(reader)

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """What a backfill of ``[start_ms, end_ms)`` reads, to the end of each partition: from the
        first record the broker timed ``allowed_lateness`` before ``start_ms`` or later, or from
        the first record of a row the table holds in the range, whichever comes first (records
        carry no trustworthy event time until parsed: the ingest sink keeps the range's rows).
        Refused when the broker no longer holds a record of a row in the range."""
        import json

        from spark_jobs.control.topics import offsets_at
        from spark_jobs.model.errors import UsageError
        from spark_jobs.model.times import duration_ms, iso

        hop = self.run.hop
        starts, held = offsets_at(hop, start_ms - duration_ms(self.run.spec.allowed_lateness))
        for (topic, partition), offset in self._rows_from(start_ms, end_ms).items():
            if (topic, partition) in held and offset < held[topic, partition][0]:
                raise UsageError(
                    f"{hop.name} holds rows from {iso(start_ms)} to {iso(end_ms)} read from topic "
                    f"{topic} partition {partition} offsets "
                    f"{offset}..{held[topic, partition][0] - 1}, which the broker no longer holds: "
                    "a backfill would lose them; backfill a range after them"
                )
            starts[topic, partition] = min(starts.get((topic, partition), offset), offset)
        offsets: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(starts.items()):
            offsets.setdefault(topic, {})[str(partition)] = offset
        return self._records(
            self.run.spark.read.option("startingOffsets", json.dumps(offsets)).option(
                "endingOffsets", "latest"
            )
        )

    def _rows_from(self, start_ms: int, end_ms: int) -> dict[tuple[str, int], int]:
        """Per partition, the first offset of a record whose row the hop's table
        holds in the range.
        """
        from pyspark.sql import functions as F

        table = self.run.lake.table(self.run.hop)
        if not table_exists(table):
            return {}
        rows = self.run.spark.read.format("delta").load(table)
        rows = rows.where(range_predicate(rows, self.run.hop.time_column, start_ms, end_ms))
        spans = (
            rows.where(F.col("_source_file").startswith("kafka://"))
            .groupBy(_address_part(-3).alias("t"), _address_part(-2).cast("int").alias("p"))
            .agg(F.min(_address_part(-1).cast("long")).alias("low"))
        )
        return {(row.t, int(row.p)): int(row.low) for row in spans.collect()}

    def read_scope(self, lines) -> str | None:
        """The rows of what ``lines`` (a backfill's read) came from, as a predicate on
        ``_source_file``: per partition, the offsets from the first record read to the last
        (None: none read)."""
        from pyspark.sql import functions as F

        offset = _address_part(-1).cast("long")
        spans = lines.groupBy(_address_part(-3).alias("t"), _address_part(-2).alias("p")).agg(
            F.min(offset).alias("low"), F.max(offset).alias("high")
        )
        ranges = [
            f"(startswith(_source_file, 'kafka://{row.t}/{row.p}/') AND CAST({_ADDRESS_PART % -1} "
            f"AS BIGINT) BETWEEN {row.low} AND {row.high})"
            for row in sorted(spans.collect())
        ]
        return f"({' OR '.join(ranges)})" if ranges else None

    def missing(self) -> str | None:
        return None


class UpstreamTable:
    """The Delta table of the hop above (or of ``name``, one of a join's upstreams): its appends
    as a stream, a time range as a batch read."""

    def __init__(self, run: HopContext, name: str | None = None):
        self.run = run
        self.upstream = run.spec.hop(name or run.hop.upstream)
        self.table = run.lake.table(self.upstream)

    def stream(self, max_files_per_trigger: int | None = None):
        if self.upstream.changes is not None:
            return self._change_feed(max_files_per_trigger)
        # Streams read appends only: commits that rewrite files (a backfill's replaceWhere, a
        # rollback's RESTORE) are skipped, since those change the tables below by other means.
        reader = self.run.spark.readStream.format("delta").option("skipChangeCommits", "true")
        if self._first_batch_reads_all(max_files_per_trigger):
            reader = reader.option("startingVersion", "0")
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        frame = reader.load(self.table)
        if self.upstream.ingests:
            frame = streamed_rows(frame)
        return frame

    def _change_feed(self, max_files_per_trigger: int | None = None):
        """A changes hop's change data feed: a new query's first batch reads the table as it is
        (its rows as inserts), then each commit's inserted, updated (both images) and deleted
        rows, with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
        from spark_jobs.logs.delta_log import table_properties
        from spark_jobs.model.errors import UsageError

        properties = table_properties(self.table)
        if properties is not None and properties.get("delta.enableChangeDataFeed") != "true":
            raise UsageError(
                f"{self.run.hop.name} reads the change data feed of {self.upstream.name}, whose "
                f"table {self.table} does not record one (it was made before): run `lakehouse "
                f"refresh {self.run.spec.name} --hop {self.upstream.name}` to make it again"
            )
        reader = self.run.spark.readStream.format("delta").option("readChangeFeed", "true")
        if max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", int(max_files_per_trigger))
        return reader.load(self.table)

    def _first_batch_reads_all(self, max_files_per_trigger: int | None) -> bool:
        """Whether a new query's first batch can read the table's commits from version 0 rather
        than a snapshot of it, with the same rows and offsets.

        A new query reads a snapshot of the table, whose files Delta lists, sorts and numbers in
        about ten small Spark jobs (0.6-0.9 s for each of ad_events' silver and gold on a first
        run). A table that was only appended to holds exactly the files its commits
        added, so reading those commits reads the same files. When the batch takes them all
        (as many as a batch admits: ``maxFilesPerTrigger``, Delta's default 1,000), its end
        offset is the one a snapshot read ends at (the version after the last, nothing of it
        read), so a restart from it or a rollback reads the same rows.
        """
        if checkpoint_log.offset_batch_ids(self.run.checkpoint):
            return False
        added = delta_log.appended_files(self.table)
        return added is not None and added <= (max_files_per_trigger or DELTA_FILES_PER_BATCH)

    def read(self, start_ms: int, end_ms: int, version: int | None = None):
        """The rows of ``[start_ms, end_ms)``, of the table now or as of ``version``."""
        frame = self.read_all(version)
        return frame.where(range_predicate(frame, self.upstream.time_column, start_ms, end_ms))

    def read_all(self, version: int | None = None):
        """Every row of the table, now or as of ``version`` (a backfill's rows too)."""
        reader = self.run.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", int(version))
        return reader.load(self.table)

    def missing(self) -> str | None:
        """The upstream table's path while it does not exist yet (nothing to read)."""
        return None if table_exists(self.table) else self.table


class UpstreamTables:
    """A join's upstream tables, each read as :class:`UpstreamTable` reads one: its transform gets
    ``{upstream hop name: frame}``, in the spec's order (the order it should join them in).

    A backfill of ``[start, end)`` reads each upstream over the range widened by the hop's
    ``within`` on both sides, so every pair the join can make for a row of the range is there;
    the sink keeps the joined rows of the range.
    """

    def __init__(self, run: HopContext):
        self.run = run
        self.sources = {name: UpstreamTable(run, name) for name in run.hop.upstreams}

    def stream(self, max_files_per_trigger: int | None = None) -> dict:
        return {name: source.stream(max_files_per_trigger) for name, source in self.sources.items()}

    def read(self, start_ms: int, end_ms: int, version: int | None = None) -> dict:
        within = self.run.hop.within_ms
        return {
            name: source.read(start_ms - within, end_ms + within)
            for name, source in self.sources.items()
        }

    def missing(self) -> str | None:
        return next(
            (source.missing() for source in self.sources.values() if source.missing()), None
        )
