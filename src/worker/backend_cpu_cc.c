/*
 * backend_cpu_cc - the CPU backend's compiler driver (see backend_cpu_cc.h).
 *
 * The compiler runs with fork + execvpe (never a shell) in its own process group, so a
 * timeout kills cc1, as and ld with it; TMPDIR points into the private directory, so its
 * intermediate files go when the directory does. Its output is capped and the private path
 * is taken out of it: the user's path comes from the `#line` the shim generator writes.
 */
#include "worker/backend_cpu_cc.h"
#include "worker/backend_cpu.h"
#include "base/clock.h"
#include "base/fdio.h"
#include "base/fsutil.h"
#include "base/log.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CPU_COMPILE_TIMEOUT_S 60.0
#define CPU_LOG_MAX (64u << 10)             /* compiler output kept */
#define CPU_SRC_NAME "kevo_module.c"


static int is_identifier(const char *s)
{
    if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
        return 0;
    for (; *s; s++) {
        if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9')))
            return 0;
    }
    return 1;
}

/* Reject requests that are malformed (programmer errors reported as KEVO_ERR_INVALID). */
static enum kevo_status check_req(const struct kevo_compile_req *req, struct kevo_buf *log)
{
    if (!req->source || req->n_entries < 0 || req->n_entries > 4096 || req->n_defines < 0 ||
        req->n_flags < 0 || (req->n_entries && !req->entries) ||
        (req->n_defines && (!req->define_names || !req->define_values)) ||
        (req->n_flags && !req->flags)) {
        kevo_buf_say(log, "invalid compile request\n");
        return KEVO_ERR_INVALID;
    }
    for (int i = 0; i < req->n_entries; i++) {
        if (!is_identifier(req->entries[i])) {
            kevo_buf_say(log, "entry %d is not a C identifier\n", i);
            return KEVO_ERR_INVALID;
        }
    }
    for (int i = 0; i < req->n_defines; i++) {
        if (!is_identifier(req->define_names[i])) {
            kevo_buf_say(log, "define %d is not a C identifier\n", i);
            return KEVO_ERR_INVALID;
        }
    }
    for (int i = 0; i < req->n_flags; i++) {
        if (!req->flags[i] || req->flags[i][0] != '-') {
            kevo_buf_say(log, "flag %d is not an option\n", i);
            return KEVO_ERR_INVALID;
        }
    }
    return KEVO_OK;
}

/* Prototypes of every entry; KEVO_ERR_COMPILE naming the function and the file otherwise. */
static enum kevo_status find_protos(const struct kevo_compile_req *req,
                                    struct kevo_cproto *protos, struct kevo_buf *log)
{
    const char *path = req->path ? req->path : "<source>";
    struct kevo_buf why;
    enum kevo_status st = KEVO_OK;

    kevo_buf_init(&why, 1024);
    for (int e = 0; e < req->n_entries && !st; e++) {
        kevo_buf_reset(&why);
        st = kevo_cproto_find(req->source, req->source_len, req->entries[e], &protos[e],
                                 &why);
        if (st == KEVO_ERR_NOTFOUND) {
            kevo_buf_say(log, "function '%s' not found in %s\n", req->entries[e], path);
            st = KEVO_ERR_COMPILE;
        } else if (st && st != KEVO_ERR_NOMEM) {
            kevo_buf_say(log, "%s: function '%s' %s\n", path, req->entries[e], kevo_buf_str(&why));
            st = KEVO_ERR_COMPILE;
        }
    }
    kevo_buf_free(&why);
    return st;
}

/* Remove a private temp dir and everything in it (one level: all we ever put there). */
void kevo_cpu_remove_dir(const char *dir)
{
    DIR *d;
    struct dirent *de;
    if (!dir)
        return;
    d = opendir(dir);
    while (d && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            (void)unlinkat(dirfd(d), de->d_name, 0);
    }
    if (d)
        closedir(d);
    (void)rmdir(dir);
}

static enum kevo_status write_file(const char *path, const char *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return KEVO_ERR_IO;
    if (kevo_fs_write_all(fd, data, n) != 0) {
        close(fd);
        return KEVO_ERR_IO;
    }
    return close(fd) == 0 ? KEVO_OK : KEVO_ERR_IO;
}

/* The compiler's command line and the storage its strings live in. */
struct cc_cmd {
    char **argv;
    char *words;              /* $CC, split in place */
    struct kevo_buf strings;  /* -D options and paths, NUL-separated */
};

static void cc_cmd_free(struct cc_cmd *c)
{
    kevo_free(c->argv);
    kevo_free(c->words);
    kevo_buf_free(&c->strings);
    memset(c, 0, sizeof *c);
}

/* argv: $CC words, fixed options, candidate flags, -D params, output, input, libraries. */
static enum kevo_status cc_cmd_init(struct cc_cmd *c, const struct kevo_compile_req *req,
                                    const char *dir)
{
    static const char *const fixed[] = { "-std=gnu11", "-O3", "-march=native", "-fopenmp",
                                         "-fPIC", "-shared" };
    const char *cc = getenv("CC");
    size_t n = 0, max = 16 + 6 + (size_t)req->n_flags + (size_t)req->n_defines + 8;
    enum kevo_status st = KEVO_OK;

    memset(c, 0, sizeof *c);
    kevo_buf_init(&c->strings, 0);
    c->argv = kevo_calloc(max, sizeof *c->argv);
    c->words = kevo_strdup(cc && *cc ? cc : "cc");
    if (!c->argv || !c->words)
        return KEVO_ERR_NOMEM;
    for (char *p = c->words; *p && n < 16;) {   // split $CC at blanks ("ccache gcc")
        p += strspn(p, " \t");
        if (!*p)
            break;
        c->argv[n++] = p;
        p += strcspn(p, " \t");
        if (*p)
            *p++ = '\0';
    }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        c->argv[n++] = (char *)fixed[i];
    for (int i = 0; i < req->n_flags; i++)
        c->argv[n++] = (char *)req->flags[i];
    for (int i = 0; i < req->n_defines && !st; i++)
        st = kevo_buf_addf(&c->strings, "-D%s=%lld%c", req->define_names[i],
                           (long long)req->define_values[i], 0);
    if (!st)
        st = kevo_buf_addf(&c->strings, "%s/" KEVO_CPU_SO_NAME "%c%s/" CPU_SRC_NAME "%c", dir, 0,
                           dir, 0);
    if (st)
        return st;
    char *s = c->strings.data;   // complete now: pointers into it stay valid
    for (int i = 0; i < req->n_defines; i++, s += strlen(s) + 1)
        c->argv[n++] = s;
    c->argv[n++] = "-o";
    c->argv[n++] = s;
    s += strlen(s) + 1;
    c->argv[n++] = s;
    c->argv[n++] = "-lm";
    c->argv[n++] = "-Wl,--no-undefined";   // a missing function: compile error, not load error
    c->argv[n] = NULL;
    return KEVO_OK;
}

/*
 * The environment of the compiler: ours, with TMPDIR pointing at the private dir (its
 * intermediate files are cleaned with it) and LC_ALL=C (plain ASCII messages).
 */
static char **compiler_env(const char *dir, char **tmpdir_var)
{
    extern char **environ;
    size_t n = 0;
    char **env;

    while (environ && environ[n])
        n++;
    env = kevo_calloc(n + 3, sizeof *env);
    *tmpdir_var = env ? kevo_strdupf("TMPDIR=%s", dir) : NULL;
    if (!*tmpdir_var) {
        kevo_free(env);
        return NULL;
    }
    size_t k = 0;
    env[k++] = *tmpdir_var;
    env[k++] = "LC_ALL=C";
    for (size_t i = 0; i < n; i++) {
        if (strncmp(environ[i], "TMPDIR=", 7) != 0 && strncmp(environ[i], "LC_ALL=", 7) != 0)
            env[k++] = environ[i];
    }
    env[k] = NULL;
    return env;
}

/* In the compiler's child: never returns. */
static void __attribute__((noreturn)) exec_compiler(char **argv, char **env, int out_fd)
{
    struct rlimit core = { 0, 0 }, cpu = { 2 * (rlim_t)CPU_COMPILE_TIMEOUT_S,
                                           2 * (rlim_t)CPU_COMPILE_TIMEOUT_S };
    sigset_t none;
    int null_fd = open("/dev/null", O_RDONLY);

    (void)setpgid(0, 0);   // its own group: a timeout kills cc1, as and ld too
    (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        _exit(126);
    (void)close_range(3, ~0u, 0);
    // stop signals ignored (inherited through exec): a job-wide SIGTERM must not turn
    // into the candidate's compile_error; the worker kills the group at its deadline
    for (int s = 1; s < NSIG; s++)
        (void)signal(s, s == SIGINT || s == SIGTERM || s == SIGHUP ? SIG_IGN : SIG_DFL);
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    (void)setrlimit(RLIMIT_CORE, &core);
    (void)setrlimit(RLIMIT_CPU, &cpu);
    execvpe(argv[0], argv, env);
    dprintf(2, "kevo: cannot run the C compiler '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Collect the child's output until EOF or the deadline; 1 if the deadline passed. */
static int collect_output(int fd, double deadline, struct kevo_buf *out)
{
    char chunk[4096];
    for (;;) {
        enum kevo_status st = kevo_fd_wait_readable(fd, &deadline);
        if (st)
            return st == KEVO_ERR_TIMEOUT;
        ssize_t r = read(fd, chunk, sizeof chunk);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        if (out->len < CPU_LOG_MAX && kevo_buf_add(out, chunk, (size_t)r) != KEVO_OK)
            KEVO_DEBUG("backend_cpu: compiler output cut short");
    }
}

/*
 * Run the compiler (fork + execvpe, never a shell) with the 60 s limit. *ok is 1 when it
 * exited with status 0; its output goes to *out.
 */
static enum kevo_status run_compiler(char **argv, const char *dir, struct kevo_buf *out, int *ok)
{
    char *tmpvar = NULL;
    char **env = compiler_env(dir, &tmpvar);
    int pfd[2] = { -1, -1 }, ws = 0, late;
    enum kevo_status st = KEVO_OK;
    pid_t pid;

    *ok = 0;
    if (!env)
        return KEVO_ERR_NOMEM;
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        st = KEVO_ERR_SYSTEM;
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        st = KEVO_ERR_SYSTEM;
        goto out;
    }
    if (pid == 0)
        exec_compiler(argv, env, pfd[1]);
    close(pfd[1]);
    pfd[1] = -1;
    late = collect_output(pfd[0], kevo_now() + CPU_COMPILE_TIMEOUT_S, out);
    if (late) {
        (void)kill(-pid, SIGKILL);
        (void)kill(pid, SIGKILL);
    }
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    (void)kill(-pid, SIGKILL);   // nothing of the compile may outlive it
    if (late) {
        kevo_buf_say(out, "\ncompiler timed out after %.0f s\n", CPU_COMPILE_TIMEOUT_S);
        ws = -1;
    }
    *ok = ws == 0;
out:
    if (pfd[0] >= 0)
        close(pfd[0]);
    if (pfd[1] >= 0)
        close(pfd[1]);
    kevo_free(env);
    kevo_free(tmpvar);
    return st;
}

/* Append the compiler output to log with the private dir's path taken out. */
static void add_log(struct kevo_buf *log, const struct kevo_buf *out, const char *dir)
{
    const char *s = kevo_buf_str(out);
    size_t dl = strlen(dir);
    while (*s) {
        const char *hit = strstr(s, dir);
        size_t n = hit ? (size_t)(hit - s) : strlen(s);
        if (log && kevo_buf_add(log, s, n) != KEVO_OK)
            return;
        s += n;
        if (hit)
            s += dl + (s[dl] == '/');
    }
}

enum kevo_status kevo_cpu_build(const struct kevo_compile_req *req,
                                  struct kevo_cproto *protos, char **out_dir,
                                  struct kevo_buf *log)
{
    enum kevo_status st;
    struct kevo_buf src, out, dirb;
    struct cc_cmd cmd;
    char *dir = NULL;
    const char *tmp = getenv("TMPDIR");
    int ok = 0;

    *out_dir = NULL;
    memset(&cmd, 0, sizeof cmd);
    kevo_buf_init(&src, req->source_len + (16u << 20));
    kevo_buf_init(&out, CPU_LOG_MAX + 4096);
    kevo_buf_init(&dirb, PATH_MAX);
    st = check_req(req, log);
    if (!st)
        st = find_protos(req, protos, log);
    if (!st)
        st = kevo_cpu_shim_gen(req, protos, &src);
    if (!st)
        st = kevo_buf_addf(&dirb, "%s/kevo-cc-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (st)
        goto out;
    dir = kevo_buf_take(&dirb);
    if (!dir || !mkdtemp(dir)) {
        kevo_buf_say(log, "cannot create a temporary directory: %s\n", strerror(errno));
        st = dir ? KEVO_ERR_IO : KEVO_ERR_NOMEM;
        kevo_free(dir);
        dir = NULL;
        goto out;
    }
    st = kevo_buf_addf(&dirb, "%s/" CPU_SRC_NAME, dir);
    if (!st)
        st = write_file(kevo_buf_str(&dirb), src.data, src.len);
    if (!st)
        st = cc_cmd_init(&cmd, req, dir);
    if (!st)
        st = run_compiler(cmd.argv, dir, &out, &ok);
    if (st)
        goto out;
    (void)unlink(kevo_buf_str(&dirb));
    add_log(log, &out, dir);
    if (!ok) {
        st = KEVO_ERR_COMPILE;
        goto out;
    }
    *out_dir = dir;
    dir = NULL;
out:
    cc_cmd_free(&cmd);
    kevo_cpu_remove_dir(dir);
    kevo_free(dir);
    kevo_buf_free(&src);
    kevo_buf_free(&out);
    kevo_buf_free(&dirb);
    return st;
}

enum kevo_status kevo_cpu_compile_check(const struct kevo_compile_req *req, struct kevo_buf *log)
{
    size_t n = req->n_entries > 0 ? (size_t)req->n_entries : 0;
    struct kevo_cproto *protos = kevo_calloc(n + 1, sizeof *protos);
    char *dir = NULL;
    enum kevo_status st;

    if (!protos)
        return KEVO_ERR_NOMEM;
    st = kevo_cpu_build(req, protos, &dir, log);
    kevo_cpu_remove_dir(dir);
    kevo_free(dir);
    for (int e = 0; e < req->n_entries; e++)
        kevo_cproto_clear(&protos[e]);
    kevo_free(protos);
    return st;
}
