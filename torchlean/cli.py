"""The ``torchlean`` command (also ``python -m torchlean``).

    torchlean quickstart [tensors|autograd|mlp] [--steps N] [--device cpu|cuda]
    torchlean check [--device cpu|cuda] [--op PATTERN] [--dtype float32|float16|bfloat16] [-v]
                                                                 (ops and fused optimizer steps)
    torchlean ir check|run|convert FILE ...
    torchlean train MODEL [--device] [--steps | --epochs] [--batch-size] [--lr] [--seed] [--eager]
                          [--checkpoint PATH [--resume]] [--plot PNG]
    torchlean bench [SUITE] [--device cpu|cuda] [--against torch|none] [--save]

Exit codes: 0 success; 1 a failed check or an error the input caused (printed as
``error: <message>``, no traceback); 2 the request cannot be served here (a
device, optional backend or component this installation lacks) or the command
line itself is malformed.

Subcommands are registered in :data:`COMMANDS` (name -> (add_arguments, run)), so
a new one, or new options on an existing one, is a small local change. Heavy
modules are imported only by the command that needs them.

    >>> from torchlean.cli import main
    >>> main(["check", "--op", "exp"])  # doctest: +ELLIPSIS
    op ...
    0
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from .errors import BackendUnavailableError, TorchLeanError

EXIT_OK, EXIT_FAIL, EXIT_UNAVAILABLE = 0, 1, 2


class CommandUnavailable(Exception):
    """A component or device this installation cannot provide (exit code 2)."""


def _err(msg: str) -> None:
    print(f"error: {msg}", file=sys.stderr)


def _import_optional(module: str, what: str):
    """Import ``module`` for command ``what``; a missing module becomes CommandUnavailable.

    Only the absence of the module itself (or of a parent package) counts as
    unavailable; an ImportError raised from inside it is a real bug and propagates.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise CommandUnavailable(f"{what}: not available in this build") from None
        if e.name and not e.name.startswith("torchlean"):
            raise CommandUnavailable(f"{what}: needs the Python package {e.name!r}, which is not "
                                     f"installed") from None
        raise


def require_device(device: str) -> None:
    """Raise CommandUnavailable with an install hint unless ``device`` can run here."""
    if device == "cpu":
        return
    from .kernels import get_kernels
    try:
        get_kernels(device)
    except BackendUnavailableError as e:
        raise CommandUnavailable(f"--device {device}: {e}") from None
    except ImportError as e:
        raise CommandUnavailable(
            f"--device {device}: the CUDA backend cannot be loaded ({e}); it needs an NVIDIA GPU "
            f"and CuPy: pip install -e \".[cuda]\"") from None


def _add_device(p, help_text="device to run on"):
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help=f"{help_text} (default cpu)")


# ---- quickstart ---------------------------------------------------------------------------------

def _quickstart_args(p):
    p.add_argument("section", nargs="?", choices=("tensors", "autograd", "mlp"),
                   help="one section (default: all three, in order)")
    p.add_argument("--steps", type=_positive_int, default=200, help="Adam steps for the mlp section (default 200)")
    _add_device(p)


def _quickstart(args) -> int:
    require_device(args.device)
    from . import quickstart
    sections = [args.section] if args.section else list(quickstart.SECTIONS)
    quickstart.run(sections, steps=args.steps, device=args.device)
    return EXIT_OK


# ---- check --------------------------------------------------------------------------------------

def _check_args(p):
    _add_device(p)
    p.add_argument("--op", metavar="PATTERN",
                   help="only ops whose name contains PATTERN or matches it as a glob (e.g. 'conv*')")
    p.add_argument("-v", "--verbose", action="store_true", help="one row per sample instead of per check")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16"), default="float32",
                   help="float16/bfloat16: each op's forward and VJP in that dtype against the float64 meaning "
                        "on the same rounded inputs, within the dtype's unit roundoff (CPU; default float32)")
    p.add_argument("--model", metavar="FILE",
                   help="instead: check a model (IR JSON or .onnx) compiled for --device against its "
                        "meaning, node by node; exit 1 on a divergence")


def _fmt_err(x: float, check: str) -> str:
    if check == "bad":
        return "-"
    return f"{x:.2e}"


def summarize(results, verbose=False):
    """Rows (op, check, device, abs, rel, status, n) aggregated over samples unless ``verbose``."""
    if verbose:
        return [(r.op, r.check, r.device, r.abs_err, r.rel_err, r.passed, 1) for r in results]
    groups: dict[tuple, list] = {}
    for r in results:
        g = groups.setdefault((r.op, r.check, r.device), [0.0, 0.0, True, 0])
        # NaN errors must not be lost by max(): a NaN anywhere marks the group NaN.
        g[0] = r.abs_err if r.abs_err != r.abs_err or g[0] != g[0] else max(g[0], r.abs_err)
        g[1] = r.rel_err if r.rel_err != r.rel_err or g[1] != g[1] else max(g[1], r.rel_err)
        g[2] = g[2] and r.passed
        g[3] += 1
    return [(op, check, dev, a, rel, ok, n) for (op, check, dev), (a, rel, ok, n) in groups.items()]


def format_table(rows) -> str:
    """The check table: op, check, device, max abs err, max rel err, samples, PASS/FAIL."""
    head = ("op", "check", "device", "max abs err", "max rel err", "n", "result")
    body = [(op, check, dev, _fmt_err(a, check), _fmt_err(r, check), str(n), "PASS" if ok else "FAIL")
            for op, check, dev, a, r, ok, n in rows]
    widths = [max(len(head[i]), *(len(b[i]) for b in body)) if body else len(head[i]) for i in range(len(head))]
    right = {3, 4, 5}

    def line(cells):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(b) for b in body])


def _check(args) -> int:
    require_device(args.device)
    if args.model:
        return _import_optional("torchlean.ir.cli", "check --model").check_model(args.model, args.device)
    from .testing.checks import run_checks, run_optimizer_checks
    if args.dtype != "float32":
        results = run_checks(args.device, args.op, dtype=args.dtype)
    else:
        results = run_checks(args.device, args.op) + run_optimizer_checks(args.device, args.op)
    if not results:
        where = f" matching {args.op!r}" if args.op else ""
        raise TorchLeanError(f"check: no op{where} has contract checks on device {args.device!r}")
    rows = summarize(results, args.verbose)
    print(format_table(rows))
    if args.dtype != "float32":
        from .dtypes import UNIT_ROUNDOFF
        print(f"\n{args.dtype} rows: 'max rel err' is the worst error in units of u |y64| (u = "
              f"{UNIT_ROUNDOFF[args.dtype]:.3g}, the unit roundoff); each element must be within u |y64| plus "
              f"the float32 kernel's allowance")
    failed = [r for r in results if not r.passed]
    if failed:
        print()
        for r in failed:
            print(f"FAIL {r.op} {r.check} on {r.device}: {r.detail}")
    n_ops = len({r.op for r in results})
    n_bad_ops = len({r.op for r in failed})
    verdict = "all passed" if not failed else f"{len(failed)} FAILED in {n_bad_ops} op(s)"
    print(f"\n{n_ops} ops, {len(results)} checks on {args.device}: {verdict}")
    return EXIT_FAIL if failed else EXIT_OK


# ---- ir -----------------------------------------------------------------------------------------

def _ir_args(p):
    sub = p.add_subparsers(dest="ir_command", metavar="check|run|convert", required=True)
    c = sub.add_parser("check", help="load an IR file, check it, print its output shapes")
    c.add_argument("file", metavar="FILE", help="IR JSON file (torchlean.ir.v1)")
    r = sub.add_parser("run", help="run an IR file on .npy inputs and print its outputs")
    r.add_argument("file", metavar="FILE", help="IR JSON file (torchlean.ir.v1)")
    r.add_argument("inputs", metavar="INPUT", nargs="*", help=".npy file per graph input, in order")
    _add_device(r)
    v = sub.add_parser("convert", help="import an ONNX model and save it as IR")
    v.add_argument("file", metavar="FILE", help="ONNX model")
    v.add_argument("out", metavar="OUT", nargs="?", help="output IR JSON (default: FILE with .json)")


def _ir(args) -> int:
    ircli = _import_optional("torchlean.ir.cli", "ir")
    if args.ir_command == "check":
        return ircli.ir_check(args.file)
    if args.ir_command == "run":
        return ircli.ir_run(args.file, args.inputs, device=args.device)
    out = args.out or str(Path(args.file).with_suffix(".json"))
    return ircli.ir_convert(args.file, out)


# ---- train --------------------------------------------------------------------------------------

def _train_args(p):
    p.add_argument("model", metavar="MODEL", help="example model to train: mlp, cnn, resnet, vit, fno1d, mamba, gpt")
    _add_device(p)
    p.add_argument("--steps", type=_positive_int, help="optimizer steps (default: the model's own)")
    p.add_argument("--epochs", type=_positive_int, help="passes over the training data (instead of --steps)")
    p.add_argument("--batch-size", type=_positive_int, help="batch size (default: the model's own)")
    p.add_argument("--lr", type=float, help="learning rate (default: the model's own)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initialization and batch order (default 0)")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="save model, optimizer and trainer state here (one safetensors file, committed atomically)")
    p.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint")
    p.add_argument("--plot", metavar="PNG", help="plot the loss curve to this file (needs matplotlib)")
    p.add_argument("--eager", action="store_true",
                   help="on cuda, run every step eagerly instead of replaying a captured CUDA graph")


def _train(args) -> int:
    train = _import_optional("torchlean.train", "train")
    entry = getattr(train, "main", None)
    if not callable(entry):
        raise CommandUnavailable("train: not available in this build")
    require_device(args.device)
    kw = dict(device=args.device, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
              checkpoint=args.checkpoint, plot=args.plot)
    # Only options the user gave are passed on, so a minimal main(model, **base) still works.
    kw.update({k: v for k, v in (("epochs", args.epochs), ("seed", args.seed), ("resume", args.resume))
               if v not in (None, False, 0)})
    if args.eager:
        kw["cuda_graph"] = False
    return int(entry(args.model, **kw) or 0)


# ---- bench --------------------------------------------------------------------------------------

def benchmarks_dir() -> Path | None:
    """The suites' folder, ``torchlean/bench/`` (shipped with the package)."""
    d = Path(__file__).resolve().parent / "bench"
    return d if d.is_dir() else None


def bench_suites(d: Path) -> dict[str, Path]:
    return {p.stem[len("bench_"):]: p for p in sorted(d.glob("bench_*.py"))}


def _first_doc_line(path: Path) -> str:
    import ast
    try:
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except (OSError, SyntaxError):
        return ""
    return doc.strip().splitlines()[0] if doc else ""


def _bench_args(p):
    p.add_argument("suite", metavar="SUITE", nargs="?", help="torchlean/bench/bench_SUITE.py (omit to list suites)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the suite's own)")
    p.add_argument("--against", choices=("torch", "none"),
                   help="reference to time against (default: torch when installed)")
    p.add_argument("--save", action="store_true", help="also write the table to ./benchmarks/results/")
    p.add_argument("--runs", type=_positive_int, help="timed runs per case (default: the suite's own)")
    p.add_argument("suite_args", nargs=argparse.REMAINDER, metavar="...",
                   help="the suite's own options, after its name (e.g. torchlean bench onnx --resnet18 1,32)")


def _bench(args) -> int:
    import runpy
    d = benchmarks_dir()
    if d is None:
        raise CommandUnavailable("bench: the benchmark suites (torchlean/bench/) are missing from this "
                                 "installation")
    suites = bench_suites(d)
    if args.suite is None:
        print(f"benchmark suites in {d}:")
        w = max(map(len, suites), default=0)
        for name, path in suites.items():
            print(f"  {name:<{w}}  {_first_doc_line(path)}")
        print("run one with: torchlean bench SUITE")
        return EXIT_OK
    if args.suite not in suites:
        known = ", ".join(suites) or "none"
        raise TorchLeanError(f"bench: unknown suite {args.suite!r} (known: {known})")
    argv = [str(suites[args.suite])]
    if args.device:
        argv += ["--device", args.device]
    if args.against:
        argv += ["--against", args.against]
    if args.save:
        argv.append("--save")
    if args.runs:
        argv += ["--runs", str(args.runs)]
    argv += list(args.suite_args or ())
    old = sys.argv
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        return _exit_code(e)
    except ModuleNotFoundError as e:
        if e.name in ("cupy", "torch"):
            need = "CuPy and a GPU (pip install 'torchlean[cuda]')" if e.name == "cupy" else \
                "PyTorch as the reference (pip install torch)"
            raise CommandUnavailable(f"bench {args.suite}: this suite needs {need}") from None
        raise
    finally:
        sys.argv = old
    return EXIT_OK


# ---- run ----------------------------------------------------------------------------------------

def _run_args(p):
    p.add_argument("--report", action="store_true",
                   help="do not run: list every torch name the files (or directories) use and which exist here")
    p.add_argument("script", help="a PyTorch program (with --report: files or directories)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the program's own arguments")


def _run(args) -> int:
    from . import runner
    if args.report:
        found, total = runner.report([args.script] + list(args.args))
        return EXIT_OK if found == total else EXIT_FAIL
    return runner.run_script(args.script, args.args)


# ---- launch -------------------------------------------------------------------------------------

def _launch_args(p):
    for flag, kw in (("--nproc-per-node", dict(type=_positive_int, default=1, help="workers on this machine")),
                     ("--nnodes", dict(type=_positive_int, default=1, help="machines in the job")),
                     ("--node-rank", dict(type=int, default=0, help="this machine's index in [0, nnodes)")),
                     ("--master-addr", dict(default="127.0.0.1", help="the address of rank 0's machine")),
                     ("--master-port", dict(type=int, default=29500, help="the port of the job's store"))):
        alias = "--" + flag[2:].replace("-", "_")
        p.add_argument(*([flag, alias] if alias != flag else [flag]), **kw)
    p.add_argument("--grace", type=float, default=5.0, help="seconds between SIGTERM and SIGKILL when stopping")
    p.add_argument("-m", "--module", action="store_true", help="run the script argument as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true",
                   help="run the script argument as a program, without Python")
    p.add_argument("script", help="the training script (run through `torchlean run`)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


def _launch(args) -> int:
    from .distributed.launch import launch
    return launch(args.script, args.args, nproc_per_node=args.nproc_per_node, nnodes=args.nnodes,
                  node_rank=args.node_rank, master_addr=args.master_addr, master_port=args.master_port,
                  module=args.module, no_python=args.no_python, grace=args.grace)


# ---- main ---------------------------------------------------------------------------------------

def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


COMMANDS = {
    "quickstart": (_quickstart_args, _quickstart, "a guided tour: tensors, autograd, training an MLP"),
    "check": (_check_args, _check, "check every op's contract against its spec, as a table"),
    "ir": (_ir_args, _ir, "check, run or convert IR files"),
    "train": (_train_args, _train, "train one of the example models"),
    "bench": (_bench_args, _bench, "run a benchmark suite (torchlean/bench/), timed against PyTorch when installed"),
    "run": (_run_args, _run, "run an unmodified PyTorch program with torchlean as torch"),
    "launch": (_launch_args, _launch, "start the processes of a distributed job on this machine (torchrun's flags)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; subcommands come from :data:`COMMANDS`."""
    from . import __version__
    p = argparse.ArgumentParser(
        prog="torchlean",
        description="torchlean: a deep-learning runtime whose every op has a reference meaning.")
    p.add_argument("--version", action="version", version=f"torchlean {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (add_args, run, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        add_args(sp)
        sp.set_defaults(_run=run)
    return p


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return EXIT_OK
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return EXIT_FAIL


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a malformed command line (argparse printed why)
        # argparse exits 2 on a usage error; here 2 means "this installation cannot do it", and a
        # malformed command line is an error in the input: 1.
        return EXIT_FAIL if e.code == 2 else _exit_code(e)
    try:
        return args._run(args)
    except CommandUnavailable as e:
        _err(str(e))
        return EXIT_UNAVAILABLE
    except BackendUnavailableError as e:
        _err(str(e))
        return EXIT_UNAVAILABLE
    except TorchLeanError as e:
        _err(str(e))
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
