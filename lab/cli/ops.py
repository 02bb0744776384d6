"""`bench speed`, `bench load`, `bench soak`, `bench scale`: measurements of this machine, each written as a JSON
record; `bench start`: `python app.py` to a usable page (lab/ops/page_start.py); `deploy-space`: this checkout as a
Hugging Face Space (lab/ops/deploy_space.py).

The measuring lives in lab.ops; here the options become its arguments, and its results a summary line on
stdout and a record at --out (built in lab.ops with records.provenance(), like every record).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict, astuple
from pathlib import Path

from lab.cli.progress import write_and_say
from lab.ops import scale
from lab.ops.deploy_space import DeployError, check_repo_id, deploy, listing, space_files
from lab.records import command_line, stated
from raqa.cli.options import app_config
from raqa.cli.output import error, progress_line, say
from raqa.config import RunForm, SpeedOptions
from raqa.evaluation import questions as question_sets  # by module: tests replace its load_questions

# KILT's 5.9 M pages hold about 2.1 G words (DPR cut the same Wikipedia into 21 M passages of 100 words),
# so about 360 words or, at 1.3 WordPiece tokens a word, 470 tokens a page: an assumption, not a measurement.
KILT_PAGES, KILT_TOKENS_PER_PAGE = 5_900_000, 470


def sample_questions(count: int, seed: int) -> list[str]:
    """count seeded NQ-open test questions (tests replace this with their own questions)."""

    return [item.question for item in question_sets.load_questions("nq", "test", limit=count, seed=seed)]


def cmd_bench(args: argparse.Namespace) -> int:
    from lab.ops.bench import main as bench_main  # lazy: imports torch (this module's other verbs need none)

    return bench_main(args)


def cmd_load_test(args: argparse.Namespace) -> int:
    """Serve the page on the real model and send one NQ question per session, all at once: first with every speed
    option off (one run at a time, the page as it was), then on with fp32 weights (runs in flight share forward
    passes), then on (decode from packed weights too); with --readers, the two readers instead (load_test_readers)."""
    from lab.ops import reliability  # lazy: imports torch
    from raqa.service import Service  # lazy: imports torch

    if args.readers:
        return load_test_readers(args)
    loaded = Service.load(app_config(args), progress=say)
    form = RunForm(window=args.window, k=args.k)
    phases = _speed_phases(loaded, sample_questions(args.sessions, args.seed), form)
    command = command_line("bench load", **stated(args, "sessions", "window", "k", "seed", "out"))
    results = {**phases, **_p95_ratios(phases), "form": list(astuple(form))}
    write_and_say(args.out, reliability.reliability_record("load_test", command, loaded, results))
    whole = all(p["completed"] == p["sessions"] == p["own_run_only"] for p in phases.values())
    return 0 if whole else 1


def _p95_ratios(phases: dict) -> dict:
    """The p95 of a whole run with the speed options on against off, and packed against fp32 weights; printed too."""
    ratio = phases["on"]["p95_s"] / phases["off"]["p95_s"]
    packed_ratio = phases["on"]["p95_s"] / phases["on_fp32_weights"]["p95_s"]
    print(f"p95 on / off: {ratio:.2f}x (target <= 0.5x); packed / fp32 weights: {packed_ratio:.2f}x")
    return {"p95_ratio_on_off": ratio, "p95_ratio_packed_fp32_weights": packed_ratio}


def _speed_phases(loaded, questions: list[str], form: RunForm) -> dict:
    """The same sessions with the speed options off, on with fp32 weights, and on; a line printed for each."""
    from lab.ops import reliability  # lazy: imports torch

    phases = {}
    for name, speed in (("off", SpeedOptions.off()), ("on_fp32_weights", SpeedOptions.exact()), ("on", SpeedOptions())):
        service = loaded.with_speed(speed)
        say(f"Speed-ups {name}: {service.concurrent_runs} run(s) at once")
        summary = reliability.load_phase(service, questions, form, progress_line(f"sessions done ({name})"))
        phases[name] = summary | {"speed": asdict(speed)}
        print(
            f"{name}: {summary['completed']}/{summary['sessions']} sessions completed, {summary['own_run_only']} "
            f"with their own run only; p50 {summary['p50_s']:.1f} s, p95 {summary['p95_s']:.1f} s, "
            f"max {summary['max_s']:.1f} s"
        )
    return phases


def load_test_readers(args: argparse.Namespace) -> int:
    """The 1.5B and the small model side by side (lab/ops/reader_load.py): decode against llama.cpp's own figure,
    then each reader with every group of visitors, each visitor a distinct NQ-open test question."""
    from lab.ops import reader_load, reliability  # lazy: imports torch
    from lab.ops.bench_speed import first_windows
    from raqa.models.gguf_parts import QWEN_1P5B, assembled
    from raqa.reading.readers import BASE_READER, GRADED_READER
    from raqa.service import Service

    service = Service.load(app_config(args), progress=say)
    big = service.reader(GRADED_READER.name)[1]
    service.answer_judge()  # loaded, as on a page where a visitor chose the small model's judge reader
    visitors = [int(n) for n in args.visitors.split(",")]
    questions = sample_questions(args.solo + sum(n for n in visitors if n > 1) + 2, args.seed)
    pages = first_windows(service.index, big, questions[:1])[0][-1]["content"]
    long_reply = [{"role": "user", "content": pages + "\n\nRetell what these pages say, in about 100 words."}]
    readers = {"load": GRADED_READER.name, "load_small_model": BASE_READER.name}
    form = RunForm(window=args.window, k=args.k)
    groups = reader_load.measure_reader_load(
        service, readers, visitors, questions=questions[1:], form=form, solo=args.solo, progress=say
    )
    say("Decode: streamed through the page's backend against llama.cpp's own figure, here and alone")
    gguf = str(assembled(QWEN_1P5B, service.config.cache_dir))  # joined at load: this only finds it
    speed = reader_load.decode_parity(big, long_reply, gguf=gguf)
    say(f"  ours {speed['decode_tok_s']:.1f} tok/s, llama.cpp alone {speed['llama_cpp_alone_decode_tok_s']:.1f} tok/s")
    command = command_line("bench load", **stated(args, "readers", "visitors", "solo", "window", "k", "seed", "out"))
    record = reliability.reliability_record("load_readers", command, service, {"form": list(astuple(form))})
    record |= {
        "speed": {"reader_1p5b": speed},
        **groups,
        "models": {"load": big.name, "load_small_model": service.backend.name},
    }
    write_and_say(args.out, record)
    return 0


def cmd_soak(args: argparse.Namespace) -> int:
    """Run questions one after another through the page's generator and record memory after each."""
    from lab.ops import reliability  # lazy: imports torch
    from raqa.service import Service  # lazy: imports torch

    service = Service.load(app_config(args), progress=say)
    questions = sample_questions(args.questions, args.seed)
    form = RunForm(window=args.window, k=args.k)
    result = reliability.soak(service, questions, args.runs, form, progress=progress_line("runs"))
    result |= {"form": list(astuple(form)), "distinct_questions": len(questions)}
    print(
        f"{args.runs} runs: RSS {result['rss_after_warmup_mib']:.0f} MiB after {result['warmup_runs']} runs, "
        f"{result['rss_last_mib']:.0f} MiB at the end ({result['growth_after_warmup_mib']:+.1f} MiB)"
    )
    command = command_line("bench soak", **stated(args, "runs", "questions", "window", "k", "seed", "out"))
    write_and_say(args.out, reliability.reliability_record("soak", command, service, result))
    return 0


def cmd_scale_bench(args: argparse.Namespace) -> int:
    """Index a generated corpus of --pages pages and measure build time, peak memory and query latency."""

    work = Path(args.work or tempfile.mkdtemp(prefix="raqa-scale-"))
    result = scale.measure_scale(args.pages, work, sample_questions(args.queries, args.seed), args.seed)
    result["kilt_extrapolation"] = scale.extrapolate(result, KILT_PAGES, KILT_TOKENS_PER_PAGE)
    b, q = result["build"], result["query_ms"]
    print(
        f"{args.pages:,} pages ({result['corpus_mib']:.0f} MiB): build {b['total_s']:.0f} s "
        f"(tokenize {b['tokenize_s']:.0f} s, score {b['score_s']:.0f} s), peak RSS {result['rss_peak_mib']:.0f} MiB, "
        f"index {result['index_mib']:.0f} MiB; query p50 {q['p50']:.1f} ms, p95 {q['p95']:.1f} ms"
    )
    if args.out:
        command = command_line("bench scale", **stated(args, "pages", "queries", "out"))
        write_and_say(args.out, scale.scale_record(command, result))
    return 0


def cmd_deploy_space(args: argparse.Namespace) -> int:
    """List (--dry-run) or upload the Space's files; exit 2 with a message on a bad id, a refused file or no token."""

    try:
        repo_id = check_repo_id(args.space)
        files = space_files()
    except DeployError as e:
        return error(e)
    print(listing(files))
    if args.dry_run:
        say(f"Dry run: nothing uploaded. Without --dry-run these files go to https://huggingface.co/spaces/{repo_id}")
        return 0
    return _upload(repo_id, files, args.private)


def _upload(repo_id: str, files, private: bool) -> int:
    from huggingface_hub import get_token  # lazy: only a deploy needs it

    token = get_token()  # HF_TOKEN, else the login `hf auth login` saved: huggingface_hub's own convention
    if not token:
        return error("No Hugging Face token: set HF_TOKEN (a token with write access) or run `hf auth login`.")
    say(f"Uploading {len(files)} files to the Space {repo_id} ...")
    print(deploy(repo_id, files, token, private=private))
    return 0


def cmd_time_start(args: argparse.Namespace) -> int:
    """Start app.py once as Spaces does and print the seconds to a usable page as JSON; with --out, start it fresh
    and warm on a new cache and write the record."""
    from lab.ops import page_start  # lazy: imports torch

    if args.out:
        return _start_record(args)
    try:
        cache = Path(args.cache) if args.cache else None
        log = Path(args.log) if args.log else None
        with page_start.started_app(args.python, not args.not_space, cache, log) as start:
            result = {"seconds": round(start.seconds, 1), "python": start.python, "space": start.space}
    except RuntimeError as e:
        return error(e)
    print(json.dumps(result))
    return 0


def _start_record(args: argparse.Namespace) -> int:
    """Start the page fresh, then warm, on a new cache, and write the record."""
    from lab.ops import page_start  # lazy: imports torch
    from raqa.evaluation.records import provenance

    result = page_start.fresh_and_warm(args.python, space=not args.not_space)
    command = command_line("bench start", not_space=args.not_space or None, out=args.out)
    write_and_say(args.out, {"measurement": "page_start", "command": command, **provenance(), "results": result})
    return 0
