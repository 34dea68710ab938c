/* The DES confirmations of the best layouts, several at once.
 *
 * Each confirmation is a DES step of thousands of GPUs (minutes), single-threaded, and
 * independent of the others: nothing a run leaves behind is read by the next (the DES shares
 * no cache with the plan). So each run is a forked child of its own, up to o->jobs at a time,
 * the longest guessed first, and sends back its step time as raw bytes. A folded step is two
 * runs (two micro-batch counts, sim_fold_counts), as independent, which run apart so that the
 * cores stay busy; its step is drawn through the two as sim_run draws it. The figures are
 * those of the runs one after another in this process, bit for bit, whatever the order the
 * children end in.
 *
 * A fork copies only the calling thread: the plan holds no other thread here (the screening
 * runs on this one), as the DES's own fork requires. A child's DES runs in a grandchild that
 * the child's watchdog watches (des_watch.c), so a child either answers or fails. */
#include "planner/planner_internal.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a child sends back: the step, or the error that stopped it. */
typedef struct {
  int ok, code;
  double step;
  char error[1024];
} plan_des_reply;

/* One DES run: a layout's whole step (micro 0), or one of its fold's two micro-batch counts. */
typedef struct {
  guint row;
  int micro;
  double cost; /* a guess of its work, to start the longest first */
  double step;
} plan_des_task;

typedef struct {
  pid_t pid;
  int fd;
  plan_des_task *task;
} plan_des_child;

/* The step of one of a folded layout's runs: `micro` micro-batches per replica, unfolded. */
static bool plan_des_part(plan_setup *s, const plan_candidate *c, int micro, double *step,
                          GError **err)
{
  cfg_workload w;
  plan_apply(s, &c->l, &w);
  w.training.global_batch = micro * w.parallel.dp * w.training.micro_batch;
  sim_options o = sim_options_for(ENG_DES);
  o.fold = false;
  sim_result run;
  bool ok = sim_run(s->c, &w, &o, &run, err);
  *step = run.step_time;
  sim_result_clear(&run);
  return ok;
}

/* In the child: runs the task and exits without running the parent's exit handlers or
 * flushing its stdio buffers (they are the parent's to flush). */
static _Noreturn void plan_des_child_main(int fd, plan_setup *s, const plan_options *o,
                                          plan_candidate *c, int micro)
{
  plan_des_reply r;
  memset(&r, 0, sizeof r); /* padding included: the reply goes down the pipe as bytes */
  GError *err = NULL;
  if (micro) {
    r.ok = plan_des_part(s, c, micro, &r.step, &err);
  } else {
    r.ok = plan_simulate(s, o, c, ENG_DES, false, &err);
    r.step = c->des_step_time_s;
  }
  if (!r.ok) {
    g_strlcpy(r.error, err ? err->message : "unknown error", sizeof r.error);
    r.code = err ? err->code : CFG_ERROR_RUNTIME;
  }
  bool sent = eng_write_all(fd, &r, sizeof r);
  close(fd);
  _exit(sent ? 0 : 3);
}

static bool plan_des_start(plan_setup *s, const plan_options *o, GArray *kept,
                           plan_des_task *t, plan_des_child *ch, GError **err)
{
  int fd;
  pid_t pid = eng_fork_replying("plan", &fd, err);
  if (pid < 0)
    return false;
  if (pid == 0)
    plan_des_child_main(fd, s, o, &g_array_index(kept, plan_candidate, t->row), t->micro);
  *ch = (plan_des_child){.pid = pid, .fd = fd, .task = t};
  return true;
}

/* Reads a child's reply and reaps it; the task gets its step, or `err` the reason. */
static bool plan_des_finish(plan_des_child *ch, GArray *kept, GError **err)
{
  plan_des_reply r;
  bool got = eng_read_all(ch->fd, &r, sizeof r);
  close(ch->fd);
  int status = 0;
  while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR)
    ;
  plan_candidate *c = &g_array_index(kept, plan_candidate, ch->task->row);
  g_autofree char *what = plan_layout_describe(&c->l);
  if (!got) {
    g_set_error(err, CFG_ERROR, CFG_ERROR_RUNTIME, "plan: the DES of %s died (status %d)",
                what, status);
    return false;
  }
  if (!r.ok) {
    r.error[sizeof r.error - 1] = '\0';
    g_set_error(err, CFG_ERROR, r.code, "%s", r.error);
    return false;
  }
  ch->task->step = r.step;
  return true;
}

/* Waits until one of the `n` children has answered; returns its index. */
static guint plan_des_wait_any(const plan_des_child *ch, guint n)
{
  g_autofree struct pollfd *p = g_new(struct pollfd, n);
  for (guint i = 0; i < n; i++)
    p[i] = (struct pollfd){.fd = ch[i].fd, .events = POLLIN};
  for (;;) {
    /* no time limit: each child's own watchdog ends a DES run that stalls */
    int ready = poll(p, n, -1);
    if (ready < 0 && errno != EINTR)
      return 0; /* without poll, a blocking read of the first child still gets every answer */
    for (guint i = 0; ready > 0 && i < n; i++)
      if (p[i].revents)
        return i;
  }
}

static bool plan_confirm_one_by_one(plan_setup *s, const plan_options *o, GArray *kept, int k,
                                    GError **err)
{
  for (int i = 0; i < k; i++) {
    if (!plan_simulate(s, o, &g_array_index(kept, plan_candidate, i), ENG_DES, false, err))
      return false;
    if (o->confirmed)
      o->confirmed(i + 1, k, o->progress_ctx);
  }
  return true;
}

/* The first error by task, so that the message does not depend on which child ended first. */
static void plan_keep_first_error(GError **first, guint *first_at, guint at, GError *e)
{
  if (!*first || at < *first_at) {
    g_clear_error(first);
    *first = e;
    *first_at = at;
  } else {
    g_error_free(e);
  }
}

/* A guess of a DES run's work: the ranks it simulates (a tensor-parallel group's siblings are
 * folded away) times the layer passes each runs. Only the order of the guesses matters: the
 * runs' times differ by twice or more (Llama 3 405B on 8,192 GPUs: TP 2 x CP 8 simulates twice
 * the ranks of TP 4 x CP 4), and the longest started last would run on alone at the end. */
static double plan_des_cost(const cfg_workload *w, int micro)
{
  const cfg_parallel *p = &w->parallel;
  int per_replica = w->training.global_batch / (p->dp * w->training.micro_batch);
  double layers = (double)w->model.layers / p->pp;
  double ranks = (double)p->cp * p->pp * p->dp; /* the GPUs over TP */
  return ranks * (micro ? micro : per_replica) * layers;
}

/* The runs of the first k rows: two for a folded step, else one. */
static GArray *plan_des_tasks(plan_setup *s, GArray *kept, int k, double *line)
{
  GArray *tasks = g_array_new(FALSE, FALSE, sizeof(plan_des_task));
  for (int i = 0; i < k; i++) {
    cfg_workload w;
    plan_apply(s, &g_array_index(kept, plan_candidate, i).l, &w);
    int m[2];
    sim_options o = sim_options_for(ENG_DES);
    /* stragglers re-run the whole step: such a layout runs as one */
    bool two = !sim_stragglers_wanted(&s->c->stragglers, s->gpus) &&
               sim_fold_counts(&w, &o, m, &line[i]);
    for (int j = 0; j < (two ? 2 : 1); j++) {
      plan_des_task t = {.row = (guint)i, .micro = two ? m[j] : 0, .step = NAN};
      t.cost = plan_des_cost(&w, t.micro);
      g_array_append_val(tasks, t);
    }
  }
  return tasks;
}

/* Each row's DES step from its runs: the line through a folded step's two. */
static void plan_des_gather(GArray *kept, const GArray *tasks, const double *line)
{
  for (guint i = 0; i < tasks->len; i++) {
    const plan_des_task *t = &g_array_index(tasks, plan_des_task, i);
    plan_candidate *c = &g_array_index(kept, plan_candidate, t->row);
    if (!t->micro)
      c->des_step_time_s = t->step;
    else if (i > 0 && g_array_index(tasks, plan_des_task, i - 1).row == t->row)
      c->des_step_time_s =
          sim_fold_step(g_array_index(tasks, plan_des_task, i - 1).step, t->step, line[t->row]);
  }
}

static guint plan_des_index(const GArray *tasks, const plan_des_task *t)
{
  return (guint)(t - &g_array_index(tasks, plan_des_task, 0));
}

static gint plan_des_cmp_cost(gconstpointer a, gconstpointer b)
{
  const plan_des_task *x = *(plan_des_task *const *)a, *y = *(plan_des_task *const *)b;
  return (x->cost < y->cost) - (x->cost > y->cost);
}

/* The tasks, the longest guessed first (ties in task order: the sort is stable). */
static GPtrArray *plan_des_order(GArray *tasks)
{
  GPtrArray *order = g_ptr_array_sized_new(tasks->len);
  for (guint i = 0; i < tasks->len; i++)
    g_ptr_array_add(order, &g_array_index(tasks, plan_des_task, i));
  g_ptr_array_sort(order, plan_des_cmp_cost);
  return order;
}

/* Runs the tasks, `jobs` at a time; the first error by task order if any failed. */
static bool plan_des_run_all(plan_setup *s, const plan_options *o, GArray *kept, GArray *tasks,
                             int jobs, GError **err)
{
  g_autofree plan_des_child *ch = g_new(plan_des_child, jobs);
  GPtrArray *order = plan_des_order(tasks);
  guint running = 0, next = 0, first_task = 0, n = tasks->len;
  int done = 0;
  GError *first = NULL;
  /* after a failure nothing new starts, but the children running are waited for */
  while (running > 0 || (!first && next < n)) {
    while (!first && next < n && running < (guint)jobs) {
      GError *e = NULL;
      plan_des_task *t = order->pdata[next++];
      if (plan_des_start(s, o, kept, t, &ch[running], &e))
        running++;
      else
        plan_keep_first_error(&first, &first_task, plan_des_index(tasks, t), e);
    }
    if (!running)
      break;
    guint i = plan_des_wait_any(ch, running);
    GError *e = NULL;
    guint task = plan_des_index(tasks, ch[i].task);
    if (!plan_des_finish(&ch[i], kept, &e))
      plan_keep_first_error(&first, &first_task, task, e);
    ch[i] = ch[--running];
    if (o->confirmed && !first)
      o->confirmed(++done, (int)n, o->progress_ctx);
  }
  g_ptr_array_free(order, TRUE);
  if (first)
    g_propagate_error(err, first);
  return !first;
}

bool plan_confirm(plan_setup *s, const plan_options *o, GArray *kept, GError **err)
{
  int k = MIN(o->top_k, (int)kept->len);
  if (o->jobs <= 1 || k < 1)
    return plan_confirm_one_by_one(s, o, kept, k, err);
  g_autofree double *line = g_new0(double, k);
  GArray *tasks = plan_des_tasks(s, kept, k, line);
  int jobs = MIN(o->jobs, (int)tasks->len);
  bool ok = plan_des_run_all(s, o, kept, tasks, jobs, err);
  if (ok)
    plan_des_gather(kept, tasks, line);
  g_array_free(tasks, TRUE);
  return ok;
}
