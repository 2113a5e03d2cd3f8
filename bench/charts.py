"""PNG charts of a suite result (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path


def _errors(rows: list[dict]) -> list[list[float]]:
    """Error bars from median to min and max."""
    return [
        [row["median"] - row["min"] for row in rows],
        [row["max"] - row["median"] for row in rows],
    ]


def draw(result: dict, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    written = []

    def save(figure, name: str) -> None:
        figure.tight_layout()
        path = folder / name
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)

    if "throughput" in result:
        ways = result["throughput"]["ways"]
        names = {
            "run": "lakehouse\nrun",
            "plain": "plain PySpark\nsame rules",
            "backfill": "lakehouse\nbackfill",
            "plain_minimal": "plain PySpark\nminimal rules",
        }
        shown = [way for way in names if way in ways]
        rows = [ways[way]["records_per_s"] for way in shown]
        figure, axis = plt.subplots(figsize=(7, 3.8))
        axis.bar(
            [names[way] for way in shown],
            [row["median"] for row in rows],
            yerr=_errors(rows),
            capsize=4,
            color=["#4c72b0", "#999999", "#55a868", "#cccccc"][: len(shown)],
        )
        axis.set_ylabel("records/s (median, min-max)")
        axis.set_title(
            f"Throughput, {result['throughput']['events']:,} events, "
            f"{result['throughput']['cores']} cores"
        )
        save(figure, "throughput.png")
    if "cost" in result:
        data = result["cost"]
        day = data["per_day_hourly"]
        figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
        labels = ["CPU-s/day", "held core-s/day"]
        keys = ["cpu_s", "held_core_s"]
        positions = range(len(keys))
        left.bar(
            [p - 0.2 for p in positions],
            [day["always_on"][k] for k in keys],
            0.4,
            label="always-on (10 s trigger)",
        )
        left.bar(
            [p + 0.2 for p in positions],
            [day["run_once_hourly"][k] for k in keys],
            0.4,
            label="run-once hourly",
        )
        left.set_xticks(list(positions), labels)
        left.set_yscale("log")
        left.set_title("Per day at hourly runs")
        left.legend(fontsize=8)
        step = 2.0
        for name, label in (
            ("always_on", "always-on"),
            ("run_once", f"run-once every {data['run_once_every_s'] / 60:g} min"),
        ):
            samples = data.get("staleness_samples", {}).get(name, [])
            right.plot([index * step / 60 for index in range(len(samples))], samples, label=label)
        right.set_xlabel("minutes")
        right.set_ylabel("staleness of gold, s")
        right.set_title("Measured staleness")
        right.legend(fontsize=8)
        save(figure, "cost.png")
    if "airflow" in result:
        modes = result["airflow"]["task_overhead"]["modes"]
        names = list(modes["shared"]["hops"])
        figure, axis = plt.subplots(figsize=(6.4, 3.8))
        width = 0.38
        for offset, (mode, label) in enumerate(
            (("task", "spark-submit per task"), ("shared", "shared driver"))
        ):
            hops = modes[mode]["hops"]
            spots = [index + (offset - 0.5) * width for index in range(len(names))]
            spark = [hops[name]["spark_job_s"]["median"] for name in names]
            overhead = [hops[name]["task_minus_spark_s"]["median"] for name in names]
            axis.bar(spots, spark, width, label=f"Spark job ({label})", color=f"C{offset * 2}")
            axis.bar(
                spots,
                overhead,
                width,
                bottom=spark,
                label=f"rest of the task ({label})",
                color=f"C{offset * 2 + 1}",
            )
        axis.set_xticks(range(len(names)), names)
        axis.set_ylabel("seconds (median)")
        axis.set_title("Airflow hop task time: a spark-submit per task vs one driver per DAG run")
        axis.legend(fontsize=7)
        save(figure, "airflow.png")
    if "rollback" in result:
        sizes = result["rollback"]["sizes"]
        rows = [sizes[name]["total_s"] for name in sizes]
        figure, axis = plt.subplots(figsize=(5, 3.4))
        axis.bar(
            [f"{name}\n{sizes[name]['events']:,} events" for name in sizes],
            [row["median"] for row in rows],
            yerr=_errors(rows),
            capsize=4,
        )
        axis.set_ylabel(f"seconds to roll back {result['rollback'].get('batches', 11) - 1} batches")
        axis.set_title(f"Rollback: ratio big/small {result['rollback']['ratio_big_over_small']}")
        save(figure, "rollback.png")
    return written
