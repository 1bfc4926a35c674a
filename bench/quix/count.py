"""The quix-streams contender of statehost's benchmark (bench/): a keyed word count.

Run by the Go parent as `python count.py '<spec JSON>'` (see README.md). For each input
record (key = value = a word, raw bytes) it adds 1 to the word's count in a RocksDB store
logged to its changelog topic, and emits (word, count as a decimal string) to the output
topic. Mode "process" runs until SIGTERM; mode "restore" starts on an empty state
directory, lets quix recover the store from its changelog, and reports how long that took.
Either way the last line on stdout is `BENCH <json>`; logs go to stderr.
"""

import json
import logging
import os
import sys
import threading
import time

from quixstreams import Application
from quixstreams.state.recovery import RecoveryManager, RecoveryPartition

RESTORE_TIMEOUT = 600.0  # seconds: restore mode gives up after 10 minutes
STORE = "default"  # quix's default store name, part of the changelog topic's name

# The count's key inside the word's state. quix stores and logs a state key as
# <message key> b"|" <state key>: a bytes state key is used as is (a str one would be
# JSON-encoded, quotes and all), so the changelog key is b"<word>|count".
COUNT_KEY = b"count"


def count(value, state):
    # state.set JSON-encodes the int with orjson, so the stored and logged value is the
    # count in decimal ASCII (b"42"), the same bytes as the output record's value.
    n = state.get(COUNT_KEY, 0) + 1
    state.set(COUNT_KEY, n)
    return str(n)


class RestoreMeter:
    """Measures quix's recovery from its own RecoveryManager and RecoveryPartition, which
    have no public listener: it wraps their methods (class-wide, before the app starts).

    Timed: one call of RecoveryManager.do_recovery, from its start (it seeks and resumes
    every changelog partition that needs recovery, all at once: quix recovers the
    assigned partitions together, in one consumer loop) to its return (every partition
    has reached the changelog's high watermark as of its assignment and the input
    partitions are resumed). This includes quix's way of noticing the end: a partition
    is seen as done on an empty poll (consumer.poll(1)) that finds its position at the
    high watermark, so the time includes that idle poll. The time to the last applied
    record is logged to stderr besides.

    Counted: records applied to the store. quix reads every changelog record from the
    start (an empty store) and skips (reads but does not apply) a record whose
    __processed_tp_offsets__ header is at or past the input's committed offset; the
    skipped ones are logged to stderr.
    """

    def __init__(self):
        self.read = 0
        self.skipped = 0
        self.start = None  # time.monotonic_ns() at do_recovery's start
        self.end = None  # ... and at its return
        self.last_record = None
        self.done = False
        self.on_done = lambda: None  # set to app.stop once the app exists
        meter = self

        orig_do_recovery = RecoveryManager.do_recovery
        orig_recover = RecoveryPartition.recover_from_changelog_message
        orig_should_apply = RecoveryPartition._should_apply_changelog

        def do_recovery(self_):
            if meter.start is None:
                meter.start = time.monotonic_ns()
            orig_do_recovery(self_)
            meter.end = time.monotonic_ns()
            if not self_.has_assignments:  # finished, not interrupted by a stop
                meter.finish()

        def recover_from_changelog_message(self_, changelog_message):
            meter.read += 1
            orig_recover(self_, changelog_message)
            meter.last_record = time.monotonic_ns()

        def should_apply_changelog(self_, processed_offsets):
            ok = orig_should_apply(self_, processed_offsets)
            if not ok:
                meter.skipped += 1
            return ok

        RecoveryManager.do_recovery = do_recovery
        RecoveryPartition.recover_from_changelog_message = recover_from_changelog_message
        RecoveryPartition._should_apply_changelog = should_apply_changelog

    def finish(self):
        self.done = True
        self.on_done()

    @property
    def applied(self):
        return self.read - self.skipped


_printed = threading.Lock()  # held for good by whoever prints the one BENCH line


def bench_line(report):
    if _printed.acquire(blocking=False):
        sys.stdout.write("BENCH " + json.dumps(report, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def restore_timeout():
    # Whatever hangs (the broker, the group join, the recovery), restore mode has
    # nothing to commit: report and leave at once.
    logging.getLogger("bench").error("restore not done after %.0fs", RESTORE_TIMEOUT)
    bench_line({"Error": f"restore not done after {RESTORE_TIMEOUT:.0f}s"})
    os._exit(1)


def main(argv):
    spec = json.loads(argv[1])
    mode = spec.get("Mode") or "process"
    if mode not in ("process", "restore"):
        raise ValueError(f"unknown mode {mode!r}")
    guarantee = {"at_least_once": "at-least-once", "exactly_once": "exactly-once"}[
        spec.get("Guarantee") or "at_least_once"
    ]
    # The spec's Coalesce is ignored: quix always coalesces (see README.md).

    meter = None
    if mode == "restore":
        meter = RestoreMeter()
        timer = threading.Timer(RESTORE_TIMEOUT, restore_timeout)
        timer.daemon = True
        timer.start()

    app = Application(
        broker_address=",".join(spec["Brokers"]),
        consumer_group=spec["App"],
        processing_guarantee=guarantee,
        commit_interval=spec["CommitInterval"] / 1e9,
        state_dir=spec["Dir"],
        auto_offset_reset="earliest",  # quix's default is "latest"
        loglevel="WARNING",  # quix's default is INFO; warnings and errors go to stderr
    )
    # The input is raw UTF-8, not JSON: the key stays bytes (it becomes the state
    # prefix as is), the value is not used and not decoded.
    input_topic = app.topic(spec["Input"], key_deserializer="bytes", value_deserializer="bytes")
    output_topic = app.topic(spec["Output"], key_serializer="bytes", value_serializer="str")
    sdf = app.dataframe(input_topic)
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(output_topic)

    # The store's changelog topic, as quix named it when the store was registered:
    # changelog__<consumer group>--<input topic>--<store name>.
    changelog = app._topic_manager.changelog_topics[input_topic.name][STORE].name  # noqa: SLF001

    report = {"Restored": 0, "RestoreNanos": 0, "Changelog": changelog}
    if mode == "process":
        app.run()  # until SIGTERM: quix stops polling, commits its checkpoint, closes
        return report, 0

    # Restore mode. The Dir is empty, so on assignment quix finds every changelog
    # partition with records ahead of its (absent) offset and recovers it before it
    # processes anything. Stop once recovery is done; stop also when the assignment
    # needs no recovery at all (an empty changelog), which never calls do_recovery.
    # (app.stop only sets flags: the run loop ends at its next turn, commits its
    # checkpoint, which is empty, and closes.)
    meter.on_done = app.stop
    orig_on_assign = Application._on_assign

    def on_assign(self_, consumer, topic_partitions):
        orig_on_assign(self_, consumer, topic_partitions)
        if not self_._state_manager.recovery_required:  # noqa: SLF001
            meter.finish()

    Application._on_assign = on_assign
    app.run()
    if not meter.done:
        return {"Error": "stopped before the restore was done"}, 1
    if meter.start is not None:
        report["Restored"] = meter.applied
        report["RestoreNanos"] = meter.end - meter.start
        last = (meter.last_record - meter.start) / 1e9 if meter.last_record else 0.0
        logging.getLogger("bench").warning(
            "restore: read %d changelog records, applied %d, skipped %d; "
            "do_recovery %.3fs, last record at %.3fs",
            meter.read, meter.applied, meter.skipped,
            report["RestoreNanos"] / 1e9, last,
        )
    return report, 0


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        report, rc = main(sys.argv)
    except BaseException as exc:  # noqa: BLE001 - any failure is reported on the BENCH line
        logging.getLogger("bench").exception("bench child failed")
        report, rc = {"Error": f"{type(exc).__name__}: {exc}"}, 1
    bench_line(report)
    sys.exit(rc)
