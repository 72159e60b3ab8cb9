"""The `rmqinspect` command group.

Commands are registered in ``COMMANDS`` below: one line per command, ``name: (module, short help)``. The module
(in this package) is imported only when that command runs, so ``--help``, ``--version`` and a cheap command never
pay for numpy, pyarrow or RocksDB (a script looping over keys pays start-up each time). The module exposes
``COMMANDS`` (a list of click commands) holding the command of that name; tests/test_cli_contracts.py checks that
this table and the modules agree (every command listed, short help in step).
"""

from __future__ import annotations

import functools
import importlib
import os

import click

# numpy's OpenBLAS starts a thread per core when numpy is imported, and those threads spin ~0.1 s waiting for
# work: rmqinspect never calls BLAS, and that CPU is taken from the scan (measured on the 1.24 GB anchor store,
# verify --jobs 1: 0.62 -> 0.54 CPU s). Set before any command imports numpy; the workers inherit it. A value the
# user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .. import __version__
from ..errors import EXIT_CODES_HELP

# name -> (module in rmqinspect.cli, the one-line help `rmqinspect --help` shows). Add a line to add a command.
COMMANDS: dict[str, tuple[str, str]] = {
    "batch-cq": ("batch_cq", "List BatchConsumeQueue entries (batchconsumequeue/, 46-byte entries, 5.x "
                             "queue.type=BatchCQ)."),
    "compact-index": ("tiered_index", "Convert unsealed tiered index files into the compacted layout."),
    "config": ("config", "Decode config/*.json (topics, subscription groups, consumer offsets, delay "
                                "offsets)."),
    "consumer-lag": ("recover", "Per consumer group and queue: committed offset against the queue's max offset "
                                "before and after the broker's recovery."),
    "cq": ("cq", "ConsumeQueue entries of one queue: queue_offset, physical_offset, size, tags_code."),
    "decode-commitlog": ("commitlog", "Decode CommitLog records: one at --offset, or a walk over a range with "
                                      "filters."),
    "dledger-peers": ("dledger", "Compare the DLedger members of one group: last index and term, the common "
                                 "prefix, the first divergent index and what a new leader would truncate."),
    "dump": ("dump", "The raw bytes at any commit-log offset (hexdump -C), valid or not, with the record "
                     "header laid over them."),
    "explain-missing": ("lookup", "Why can't a message be found?"),
    "export": ("export", "Write every message of STORE... as rows of a Parquet dataset."),
    "fate": ("fate", "One message's fate: where it is, its consume-queue entry, index items, whether it "
                     "survives a restart, and which groups consumed it."),
    "gc": ("gc", "Which CommitLog, ConsumeQueue and IndexFile files the broker's clean services would delete "
                 "now and why."),
    "index-lookup": ("lookup", "DefaultMessageStore.queryMessage over the IndexFiles (what `mqadmin "
                               "queryMsgByKey` gets)."),
    "msgid": ("lookup", "Decode a message id: offsetMsgId (store host + physical offset) and UNIQ_KEY."),
    "peers": ("peers", "Compare replicas of one broker group (classic master/slave, controller mode): loss windows, "
                       "epochs, truncation on rejoin."),
    "rebuild": ("rebuild", "Regenerate ConsumeQueue and IndexFile from the CommitLog as the broker's "
                           "dispatcher writes them."),
    "recover": ("recover", "The recovery RocketMQ runs when it loads STORE, reproduced offline (never writes)."),
    "report": ("report", "Write the post-mortem of STORE(s) as one self-contained HTML file that opens offline."),
    "rocksdb-cq": ("rocksdb_cq", "List a RocksDB ConsumeQueue (5.x storeType=defaultRocksDB)."),
    "salvage": ("recover", "Find the intact messages the broker would discard."),
    "spark": ("spark", "Fleet analytics on Apache Spark (pip install 'rmqinspect[spark]', Java 17+)."),
    "store-info": ("store_info", "Detect which RocketMQ generation wrote STORE (4.x vs 5.x) and list the "
                                 "evidence."),
    "summary": ("commitlog", "File map, offsets, per-topic and per-queue counts, time range, checkpoint, abort "
                             "file, and the RocketMQ version."),
    "tiered-index-lookup": ("tiered_index", "Look a key up in tiered-store index files."),
    "timers": ("timers", "List scheduled (timer) messages: timerlog/ units and their records."),
    "txn": ("txn", "Every transaction with its verdict: committed, rolled back, in doubt, open or given up."),
    "verify": ("verify", "Check every record, consume-queue entry, index item and the checkpoint against the "
                         "data."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported when looked up (``COMMANDS``), not when the program starts.
    ``.commands`` still gives every command (importing them all) for code that walks the tree."""

    @property  # type: ignore[override]
    def commands(self) -> dict[str, click.Command]:
        for name in COMMANDS:
            self._load(name)
        return self._loaded

    @commands.setter
    def commands(self, value: dict[str, click.Command]) -> None:
        self._loaded = dict(value)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        self._loaded[name or cmd.name or ""] = cmd

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self._loaded))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._load(cmd_name)

    def _load(self, cmd_name: str) -> click.Command | None:
        if cmd_name in self._loaded:
            return self._loaded[cmd_name]
        if cmd_name not in COMMANDS:
            return None
        module = importlib.import_module(f"{__package__}.{COMMANDS[cmd_name][0]}")
        for cmd in getattr(module, "COMMANDS", ()):
            if cmd.name == cmd_name:
                _add_broker_config(cmd)
                self._loaded[cmd_name] = cmd
                return cmd
        raise LookupError(f"rmqinspect.cli.{COMMANDS[cmd_name][0]} has no command {cmd_name!r}")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # the listing comes from the table: `rmqinspect --help` imports no command module
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
             epilog="\b\n" + EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="rmqinspect")
@click.option("--debug", is_flag=True, help="Show the Python traceback with an error (also RMQINSPECT_DEBUG=1).")
def cli(debug: bool) -> None:
    """Offline forensic inspection of Apache RocketMQ store directories (4.x and 5.x).

    Every command opens the store read-only and never writes into it. Point STORE at a store root
    (the directory holding commitlog/, consumequeue/, index/, checkpoint) or at one commitlog file.
    """
    from ..store.fileset_checks import set_notice_sink
    from .output import set_debug, warn

    set_debug(debug)
    set_notice_sink(warn)  # notes on the store's files (a link leaving the store, a directory in a file's place)


def _add_broker_config(cmd: click.Command) -> None:
    """--broker-config, --columns, --vertical and --no-truncate on every command, defined once (cli._params):
    commands never declare them."""
    from ._params import apply_broker_config, broker_config_option, layout_options, live_option

    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _add_broker_config(sub)
        return
    if any(p.name == "broker_config" for p in cmd.params) or cmd.callback is None:
        return
    cmd.params.append(broker_config_option())
    cmd.params.extend(o for o in layout_options() if not any(p.name == o.name for p in cmd.params))
    cmd.params.append(live_option())
    callback = cmd.callback

    @functools.wraps(callback)
    def with_broker_config(*args, **kwargs):
        ctx = click.get_current_context()
        live = kwargs.pop("live", False)
        if ctx.command is cmd:  # not when another command ctx.invoke()s this one with its own arguments
            from ..store.live import set_live

            set_live(live)
            apply_broker_config(ctx, kwargs)
        return callback(*args, **kwargs)

    cmd.callback = with_broker_config


def main() -> None:
    from . import lifecycle

    lifecycle.install()  # SIGINT/SIGTERM -> exit 130/143 after clean-up; SIGXFSZ -> EFBIG (exit 5)
    try:
        cli(prog_name="rmqinspect")
    except lifecycle.Interrupted as e:  # before or after a command ran (its own are reported by handle_errors)
        from ..sinks.staging import discard_pending

        discard_pending()
        click.echo(f"rmqinspect: error: interrupted by {e.name}", err=True)
        lifecycle.exit_interrupted(e)
    finally:
        lifecycle.exiting()
