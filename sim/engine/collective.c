/* Timing a lone collective, as nccl-tests does: every GPU of the first `gpus` runs the same
 * collective over its group of `group` (groups run at once, and contend in the DES).
 * sendrecv over more than two GPUs is a ring: each GPU sends to the next and receives from the
 * previous at the same time, as nccl-tests' sendrecv_perf. */
#include "engine/engine_internal.h"

static void eng_coll_groups(prog_program *p, int fam, int gpus, int group)
{
  g_autofree int *ranks = g_new(int, group);
  for (int g0 = 0; g0 < gpus; g0 += group) {
    for (int i = 0; i < group; i++)
      ranks[i] = g0 + i;
    int gid = prog_group_add(p, ranks, group);
    for (int i = 0; i < group; i++)
      prog_family_set(p, fam, g0 + i, gid);
  }
}

static void eng_coll_ring_pairs(prog_program *p, int cls, int gpus, double bytes)
{
  int to_next = prog_family_add(p, "send-next", PROG_DIM_PP);
  int from_prev = prog_family_add(p, "recv-prev", PROG_DIM_PP);
  for (int r = 0; r < gpus; r++) {
    int out[2] = {r, (r + 1) % gpus}, in[2] = {(r + gpus - 1) % gpus, r};
    prog_family_set(p, to_next, r, prog_group_add(p, out, 2));
    prog_family_set(p, from_prev, r, prog_group_add(p, in, 2));
  }
  prog_comm(p, cls, PROG_STREAM_PP, "send", PROG_COLL_SENDRECV, to_next, bytes, NULL, 0);
  prog_comm(p, cls, PROG_STREAM_TP, "recv", PROG_COLL_SENDRECV, from_prev, bytes, NULL, 0);
}

prog_program *eng_collective_program(prog_coll op, int gpus, int group, double bytes)
{
  prog_program *p = prog_new(gpus);
  int cls = prog_class_add(p, "member");
  for (int r = 0; r < gpus; r++)
    prog_rank_set_class(p, r, cls);
  prog_finalize(p);
  if (op == PROG_COLL_SENDRECV && group > 2) {
    eng_coll_ring_pairs(p, cls, gpus, bytes);
    return p;
  }
  int fam = prog_family_add(p, "group", PROG_DIM_DP);
  eng_coll_groups(p, fam, gpus, group);
  prog_comm(p, cls, PROG_STREAM_DP, prog_coll_name(op), op, fam, bytes, NULL, 0);
  return p;
}

bool eng_collective_time(const hw_cluster *hw, const eng_options *opt, prog_coll op, int gpus,
                         int group, double bytes, eng_coll_result *out, GError **err)
{
  prog_program *p = eng_collective_program(op, gpus, group, bytes);
  eng_result r;
  bool ok = eng_run(p, hw, opt, &r, err);
  if (ok) {
    out->time = r.step_time;
    /* what the tuner picked, for the report */
    coll_planner *pl = eng_planner_new(hw, opt);
    const prog_class *k = prog_class_at(p, 0);
    const coll_schedule *s = eng_schedule_for(pl, p, &g_array_index(k->ops, prog_op, 0), 0, NULL);
    out->algo = s ? s->plan->algo : COLL_ALGO_AUTO;
    out->proto = s && s->plan->nphases ? s->proto : -1;
    coll_planner_free(pl);
  }
  eng_result_clear(&r);
  prog_free(p);
  return ok;
}
