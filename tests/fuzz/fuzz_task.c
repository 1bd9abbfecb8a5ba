/*
 * fuzz_task - libFuzzer target for the task and candidate parsers (src/task.c, src/expr.c).
 *
 * The first byte selects the mode, the rest is the file text:
 *   bit 0: language, 0 -> "fuzz.cu", 1 -> "fuzz.c";
 *   bit 1: 0 -> parse as a task; if it parses, parse a fixed small candidate against it
 *          and evaluate every workload's environment, shapes, bytes and flops;
 *          1 -> parse as a candidate against a fixed task (candidates are the hostile
 *          input kevo really meets: LLM-written), then evaluate its environments.
 * Seeds: tests/fuzz/corpus/ (their first line is the mode byte and a newline).
 *
 * Build and run (clang with libFuzzer; UB made fatal so none passes as a log line):
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Iinclude \
 *     -Isrc -I/usr/local/cuda/include tests/fuzz/fuzz_task.c src/mem.c src/buf.c \
 *     src/log.c src/expr.c src/task.c src/task_check.c -o /tmp/fuzz_task
 *   mkdir -p /tmp/corpus && UBSAN_OPTIONS=halt_on_error=1 /tmp/fuzz_task \
 *     -max_total_time=120 -max_len=8192 /tmp/corpus tests/fuzz/corpus
 */
#include "base/mem.h"
#include "core/task.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *const task_text[2] = {
    "// kevo task fz\n// kevo size M=64 N=cdiv(M, 3)\n// kevo holdout M=7 N=5\n"
    "// kevo input x f32[M,N] normal(0,1)\n// kevo output y f32[M,N]\n// kevo scalar a f32 2\n"
    "// kevo bytes 8*M*N\n// kevo launch k grid=M block=(32,2) smem=4 (x, y, a, N)\n",
    "// kevo task fz\n// kevo size M=64 N=cdiv(M, 3)\n// kevo holdout M=7 N=5\n"
    "// kevo input x i32[M,N] randint(0, M)\n// kevo output y f32[M,N]\n// kevo scalar a i32 2\n"
    "// kevo bytes 8*M*N\n// kevo call f(x, y, a, N)\n",
};

static const char *const cand_text[2] = {
    "// kevo param T 32 64\n// kevo scratch fz_s f32[T]\n"
    "// kevo launch fz_k grid=1 block=T (fz_s, T)\n",
    "// kevo param T 1 2\n// kevo scratch fz_s f32[T]\n// kevo call fz_f(fz_s, T)\n",
};

/* Evaluate what kevo_eval would: each workload's env, every tensor's numel, bytes, flops,
 * and the launch expressions. Failures are fine; crashes, leaks and UB are not. */
static void exercise(const struct kevo_task *task, const struct kevo_task *cand)
{
    const struct kevo_task *src = cand ? cand : task;
    for (int w = 0; w < task->n_workloads; w++) {
        struct kevo_env env;
        char *msg = NULL;
        int64_t v;
        if (kevo_task_env(task, w, cand, NULL, &env, &msg)) {
            kevo_free(msg);
            continue;
        }
        for (int i = 0; i < src->n_tensors; i++) {
            (void)kevo_tensor_numel(&src->tensors[i], &env, &v, &msg);
            kevo_free(msg);
            msg = NULL;
        }
        if (task->bytes)
            (void)kevo_env_eval(&env, task->bytes, &v, NULL);
        if (task->flops)
            (void)kevo_env_eval(&env, task->flops, &v, NULL);
        for (int l = 0; l < src->n_launches; l++) {
            const struct kevo_launch *L = &src->launches[l];
            for (int d = 0; d < 3; d++) {
                (void)kevo_env_eval(&env, L->grid[d], &v, NULL);
                (void)kevo_env_eval(&env, L->block[d], &v, NULL);
            }
            (void)kevo_env_eval(&env, L->smem, &v, &msg);
            kevo_free(msg);
            msg = NULL;
            for (int a = 0; a < L->n_args; a++)
                if (L->args[a].kind == KEVO_ARG_EXPR)
                    (void)kevo_env_eval(&env, L->args[a].text, &v, NULL);
        }
    }
    for (int i = 0; i < task->n_tensors; i++) {
        double r, a;
        kevo_task_tol(task, task->tensors[i].name, task->tensors[i].dtype, &r, &a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kevo_task *task = NULL, *cand = NULL;
    char *msg = NULL;
    int lang, as_cand;
    const char *path;

    if (size < 1)
        return 0;
    lang = data[0] & 1;
    as_cand = (data[0] >> 1) & 1;
    path = lang ? "fuzz.c" : "fuzz.cu";
    if (!as_cand) {
        if (kevo_task_parse(path, (const char *)data + 1, size - 1, &task, &msg) == KEVO_OK) {
            exercise(task, NULL);
            if (kevo_candidate_parse(task, path, cand_text[lang], strlen(cand_text[lang]),
                                     &cand, &msg) == KEVO_OK)
                exercise(task, cand);
        }
    } else {
        if (kevo_task_parse(path, task_text[lang], strlen(task_text[lang]), &task, &msg))
            abort();   /* the fixed task must parse */
        if (kevo_candidate_parse(task, path, (const char *)data + 1, size - 1, &cand,
                                 &msg) == KEVO_OK)
            exercise(task, cand);
    }
    kevo_free(msg);
    kevo_task_free(cand);
    kevo_task_free(task);
    return 0;
}
