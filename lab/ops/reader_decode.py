"""The 1.5B's decode on the page against llama.cpp's own figure for the same file, threads and request.

Three readings of one request (the first window's pages of the first NQ-open test question and "retell them", 64
tokens at temperature 0, 2 threads), median of `runs` each:
    clean       llama.cpp alone in a child process that imports nothing else (the engine's own figure);
    page_engine llama.cpp's own timings in a process set up as the page is: the small model loaded and used by the
                batcher's thread first, so torch's OpenMP runtime has its threads;
    page_ours   the same request streamed through the page's backend in that process (tokens after the first over
                the time from the first to the last).
The first shows what the engine does; the other two what a visitor gets. Left out: llama.cpp's `llama-bench`
program (no wheel ships it).

    python -m lab.ops.reader_decode --out assets/results/reader-decode.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from lab.records import command_line, write_json
from raqa.evaluation.records import provenance
from raqa.models.base import Usage

READER_DECODE_TOKENS = 64

_CHILD = """
import json, sys
import xllamacpp
job = json.load(sys.stdin)
params = xllamacpp.CommonParams()
params.model.path = job["gguf"]
params.n_parallel, params.n_ctx, params.warmup, params.verbosity = 1, 8192, False, -1
params.cpuparams.n_threads = params.cpuparams_batch.n_threads = job["threads"]
server = xllamacpp.Server(params)
timings = [server.handle_chat_completions(job["request"])["timings"] for _ in range(job["runs"])]
print(json.dumps(timings))
"""


def clean_process(gguf: str, request: dict, threads: int, runs: int) -> list[dict]:
    """llama.cpp's timings for request, `runs` times, in a child process that loads nothing but llama.cpp."""
    job = json.dumps({"gguf": gguf, "request": request, "threads": threads, "runs": runs})
    done = subprocess.run([sys.executable, "-c", _CHILD], input=job, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def decode_rate(backend, messages) -> float:
    """Decode tok/s of one reply streamed through the backend, as a page's run reads it."""
    stamps, tokens = [], 0
    for piece in backend.reply(messages, max_new_tokens=READER_DECODE_TOKENS):
        if isinstance(piece, str) and piece:
            stamps.append(time.perf_counter())
        elif isinstance(piece, Usage):
            tokens = piece.completion_tokens
    return (tokens - 1) / (stamps[-1] - stamps[0])


def measure_reader_decode(runs: int = 3) -> dict:
    from lab.ops.bench_speed import first_windows
    from raqa.config import AppConfig, RunForm
    from raqa.evaluation.questions import load_questions
    from raqa.models.gguf_parts import QWEN_1P5B, assembled
    from raqa.models.llamacpp import THREADS
    from raqa.reading.readers import BASE_READER, GRADED_READER
    from raqa.service import Service

    service = Service.load(AppConfig.from_env(), progress=print)
    question = load_questions("nq", "test", limit=1, seed=0)[0].question
    for _ in service.events(service.plan(question, RunForm(reader=BASE_READER.name))):
        pass  # the small model reads first, on the batcher's thread, as on a page where a visitor chose it
    big = service.reader(GRADED_READER.name)[1]
    pages = first_windows(service.index, big, [question])[0][-1]["content"]
    messages = [{"role": "user", "content": pages + "\n\nRetell what these pages say, in about 100 words."}]
    request = big._request(messages, READER_DECODE_TOKENS, False)
    page_engine, page_ours = [], []
    for _ in range(runs):
        page_ours.append(decode_rate(big, messages))
        page_engine.append(big.server.handle_chat_completions(request)["timings"]["predicted_per_second"])
    gguf = assembled(QWEN_1P5B, service.config.cache_dir)  # joined at load: this only checks it is there
    clean = [t["predicted_per_second"] for t in clean_process(str(gguf), request, THREADS, runs)]
    result = {
        "clean_tok_s": statistics.median(clean),
        "page_engine_tok_s": statistics.median(page_engine),
        "page_ours_tok_s": statistics.median(page_ours),
        "runs": {"clean": clean, "page_engine": page_engine, "page_ours": page_ours},
        "prompt_tokens": big.count_prompt_tokens(messages),
        "threads": THREADS,
        "question": question,
        "model": big.name,
    }
    result["clean_over_page_ours"] = result["clean_tok_s"] / result["page_ours_tok_s"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.ops.reader_decode", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    r = measure_reader_decode(args.runs)
    print(
        f"decode tok/s: llama.cpp alone {r['clean_tok_s']:.1f}; in the page's process: llama.cpp's own "
        f"{r['page_engine_tok_s']:.1f}, streamed through the backend {r['page_ours_tok_s']:.1f} "
        f"({r['clean_over_page_ours']:.2f}x slower than alone)"
    )
    if args.out:
        command = command_line("lab.ops.reader_decode", runs=args.runs if args.runs != 3 else None, out=args.out)
        write_json(args.out, {"measurement": "reader_decode", "command": command, **provenance(), "results": r})
        print(f"Wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
