/*
 * help - `kevo COMMAND --help` (or -h) and `kevo help COMMAND`: one command's usage, what
 * it does, its arguments and its options, on stdout, exit status 0 (docs/cli.md). The
 * whole list of commands is cli_usage_text (common.c); the details stay in docs/.
 */
#include "cli.h"

#include <stdio.h>
#include <string.h>

struct help {
    const char *cmd;
    const char *text;
};

/* The eval options, as eval, bench and run take them (cli_eval_option). */
#define EVAL_OPTIONS                                                                        \
    "  --backend cpu|cuda   where to evaluate (default: the task's language: .cu on CUDA,\n" \
    "                       .c on the CPU)\n"                                                \
    "  --device N           the GPU to use (default 0)\n"                                    \
    "  --trials N           correctness trials per workload, 3 to 100 (default 3)\n"         \
    "  --holdout            also run the task's held-out sizes for candidates that pass\n"   \
    "  --no-timing          verify only\n"                                                   \
    "  --deadline SECONDS   per request; a candidate that hangs is killed (default 120)\n"   \
    "  --time-cap SECONDS   timing per workload\n"

static const struct help helps[] = {
    { "check",
      "usage: kevo check TASK|DIR... [--task TASK]\n"
      "\n"
      "Parse each task file (directories are walked for .cu and .c files), check its\n"
      "launch lines against the kernels' parameters and compile its reference in a worker.\n"
      "No GPU is needed. Errors name the file, line and column.\n"
      "\n"
      "  --task TASK          the files are candidates for TASK, checked against it\n"
      "\n"
      "exit status: 0 every file is fine, 1 one is not, 2 bad usage\n" },
    { "eval",
      "usage: kevo eval TASK [CANDIDATE...] [options]\n"
      "\n"
      "Verify and time the task's reference and each candidate in a worker process: fresh\n"
      "secret inputs, poisoned and canaried buffers, determinism, timing against the\n"
      "device's speed of light. Each candidate gets one verdict with its evidence.\n"
      "\n"
      "  --json               print the document of docs/eval-json.md\n"
      "  --dump DIR           write the reference's trial-0 inputs and outputs to DIR\n"
      "  --profile            hardware counters of each ok candidate, counted in the worker\n"
      "                       with CUPTI (Nsight Compute's ncu, KEVO_NCU, where CUPTI\n"
      "                       cannot): a diagnosis and counters per kernel\n"
      EVAL_OPTIONS
      "\n"
      "exit status: 0 every candidate has a verdict (whatever it is), 1 kevo failed, 2 bad "
      "usage\n" },
    { "bench",
      "usage: kevo bench [TASK|DIR...] [options]\n"
      "\n"
      "Evaluate a suite of tasks (default: tasks/) and score it (docs/bench.md).\n"
      "\n"
      "  --candidates DIR     evaluate DIR/NAME.cu|.c instead of the references\n"
      "  --baselines FILE     compare with PyTorch timings (bench/torch_baseline.py)\n"
      "  --json               print the bench document\n"
      EVAL_OPTIONS },
    { "calibrate",
      "usage: kevo calibrate [--device N] [--backend cpu|cuda] [--force] [--json]\n"
      "\n"
      "Measure this device's DRAM bandwidth and peak throughput, cached per device under\n"
      "$KEVO_CACHE_DIR (default ~/.cache/kevo).\n"
      "\n"
      "  --force              measure again\n"
      "  --json               print the figures as JSON\n" },
    { "run",
      "usage: kevo run TASK [options]\n"
      "       kevo run --resume ID [options]\n"
      "       kevo run --replay ID\n"
      "\n"
      "Evolve faster candidates for TASK from its seeds (docs/search.md), keeping every\n"
      "candidate in the archive; prints one line per verdict and a summary.\n"
      "\n"
      "  --seed CAND          a starting candidate (repeatable; default: the reference and,\n"
      "                       for a suite task, its exemplar from examples/seeds/)\n"
      "  --no-exemplar        no exemplar seed: start from the reference alone\n"
      "  --budget N           evaluations in the run, all sessions (default 200)\n"
      "  --time SECONDS       wall-clock limit of this session\n"
      "  --target F           stop at this fraction of SOL\n"
      "  --stagnation N       stop after N evaluations without a new best\n"
      "  --islands N          islands of the search (default 2)\n"
      "  --rng-seed N         the search's random seed (runs are reproducible)\n"
      "  --gpus LIST          devices, one worker each: 0,1,3\n"
      "  --mpi                under mpirun: rank 0 runs the search, every rank's\n"
      "                       devices evaluate (docs/cluster.md)\n"
      "  --resume ID          go on with run ID\n"
      "  --replay ID          run ID again from its record: no GPU, no network\n"
      "  --archive PATH       the archive (default $KEVO_ARCHIVE, else\n"
      "                       ~/.local/share/kevo/archive.db)\n"
      "  --json               print the events as JSON lines\n"
      "  --model SPEC         an LLM model for the LLM operators (repeatable; docs/llm.md)\n"
      "  --cost-cap X         stop spending on LLM calls at X\n"
      "  --profile-share F    CUDA: each new best gets its hardware counters while they\n"
      "                       cost at most F of the worker time (default 0.1)\n"
      "  --no-profile         no hardware counters\n"
      "  --llm-concurrency N  LLM calls in flight (default 4)\n"
      "  --offline            LLM replies only from the archive (kevo llm pending)\n"
      "  --prompts DIR        prompt templates\n"
      "  --prices FILE        price table\n"
      "  --config FILE        config file (default ~/.config/kevo/config.json)\n"
      EVAL_OPTIONS
      "\n"
      "Ctrl-C stops the run cleanly (kevo run --resume ID goes on); a second one kills kevo.\n" },
    { "runs",
      "usage: kevo runs [ID] [--candidates] [--archive PATH] [--json]\n"
      "\n"
      "List the runs of the archive, or show run ID: its best with its figures per\n"
      "workload, the lineage of the best back to a seed, the operators' statistics and\n"
      "what each LLM model did.\n"
      "\n"
      "  --candidates         every candidate of run ID: id, operator, parents, verdict,\n"
      "                       time, % of SOL and speedup over the reference per workload\n"
      "  --archive PATH       the archive (default as kevo run)\n"
      "  --json               print JSON\n" },
    { "show",
      "usage: kevo show CAND [--archive PATH] [--json]\n"
      "\n"
      "Show one candidate of the archive (CAND: its id, as 64 or cand64): its run,\n"
      "operator and parents, verdict and message, params and flags, figures per workload,\n"
      "evidence, compile log (when it did not compile) and its source.\n"
      "\n"
      "  --archive PATH       the archive (default as kevo run)\n"
      "  --json               print JSON\n" },
    { "export",
      "usage: kevo export ID --out DIR [--archive PATH]\n"
      "\n"
      "Write run ID's held-out-checked best as standalone files in DIR: the kernel, a C\n"
      "launcher, the reference, a test and a Makefile (docs/search.md \"Export\").\n" },
    { "report",
      "usage: kevo report RUN [--archive PATH] [--baselines FILE] [--out FILE]\n"
      "       kevo report --bench FILE [--out FILE]\n"
      "\n"
      "Write run RUN of the archive as one self-contained HTML page (docs/report.md): the\n"
      "search's progress, the device's roofline with every correct candidate on it, the\n"
      "lineage of the best, operators and models (LLM calls, tokens, cost), verdicts with\n"
      "the failed candidates' messages, and the best kernel: its figures per workload, its\n"
      "held-out result, its diff against its parent and its source. Inline CSS and SVG: no\n"
      "script, nothing loaded from anywhere. With --bench, the document of kevo bench --json\n"
      "instead: the suite's table, fast_p curves and SOL per task.\n"
      "\n"
      "  --archive PATH       the archive (default as kevo run)\n"
      "  --baselines FILE     PyTorch's times beside the best's (bench/torch_baseline.py)\n"
      "  --bench FILE         a bench document (kevo bench --json) instead of a run\n"
      "  --out FILE           write the page to FILE (default: stdout)\n" },
    { "models",
      "usage: kevo models check [--model SPEC]... [--config FILE] [--prices FILE] [--json]\n"
      "\n"
      "Send each LLM model one tiny request and say whether it works and, when not, what to\n"
      "fix (docs/llm.md \"Checking models\").\n"
      "\n"
      "exit status: 0 every model works, 1 one failed, 2 bad usage\n" },
    { "llm",
      "usage: kevo llm pending RUN [--archive PATH] [--out FILE|-]\n"
      "       kevo llm answer FILE|- [--model SPEC]... [--config FILE] [--out FILE|-]\n"
      "                      [--cost-cap X] [--prices FILE] [--llm-concurrency N]\n"
      "       kevo llm import FILE|- [--archive PATH]\n"
      "\n"
      "LLM calls across an air gap (docs/llm.md \"Air-gapped clusters\"): pending writes the\n"
      "calls an offline run could not make as JSON lines, answer makes them where there is\n"
      "a network, import stores the replies for kevo run --resume.\n" },
    { "prompt",
      "usage: kevo prompt TASK [CANDIDATE] [--op generate|improve|fix|plan]\n"
      "                   [--eval-json FILE] [--calibration FILE] [--device N] [--json]\n"
      "\n"
      "Print the prompt kevo's LLM operators would send a model (docs/agents.md), for any\n"
      "chat UI or agent: the task without its held-out sizes, the device's measured figures,\n"
      "the candidate with its verdict and measurements, playbook notes and an exemplar\n"
      "(docs/playbook/README.md).\n"
      "\n"
      "  --op OP              generate (no candidate), improve, fix or plan (default:\n"
      "                       improve with a CANDIDATE, generate without)\n"
      "  --eval-json FILE     the candidate's evaluation: kevo eval --json's document (its\n"
      "                       entry for CANDIDATE, else its first) or one eval result\n"
      "  --calibration FILE   the device's figures (kevo calibrate --json); default: the\n"
      "                       eval document's, else measured here (cached)\n"
      "  --device N           the device measured (default 0)\n"
      "  --json               print {op, template, system, user, ...} as JSON\n" },
    { "mcp",
      "usage: kevo mcp [--archive PATH] [--allow DIR]... [--device N] [--model SPEC]...\n"
      "\n"
      "Serve a coding agent (Claude Code, Codex CLI, Cursor, ...) over stdin and stdout with\n"
      "the Model Context Protocol (docs/agents.md): tools check, eval, prompt, run_start,\n"
      "run_status, run_stop, runs, show and export, and resources (the agent brief, the\n"
      "task format, the evaluation protocol, the playbook, the device's calibration). Every\n"
      "candidate evaluated is recorded in the archive: one run per task and session,\n"
      "operator agent. Paths must lie in the working directory's tree or an --allow DIR.\n"
      "\n"
      "  --archive PATH       the archive (default as kevo run)\n"
      "  --allow DIR          another directory tools may read and write (repeatable)\n"
      "  --device N           the GPU evaluations run on (default 0)\n"
      "  --model SPEC         an LLM model the searches of run_start may use (repeatable)\n"
      "\n"
      "stdout carries protocol messages only; logs go to stderr. It ends when stdin closes\n"
      "or on SIGTERM, stopping the searches it started (they stay resumable).\n" },
    { "version", "usage: kevo version\n\nPrint kevo's version and the data directory it reads.\n" },
    { "help",
      "usage: kevo help [COMMAND]\n"
      "\n"
      "The list of commands, or one command's usage (as kevo COMMAND --help).\n" },
};

int cli_help(const char *cmd)
{
    for (size_t i = 0; cmd && i < sizeof helps / sizeof helps[0]; i++) {
        if (strcmp(cmd, helps[i].cmd) == 0) {
            fputs(helps[i].text, stdout);
            return 0;
        }
    }
    return -1;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}
