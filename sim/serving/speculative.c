/* Speculative decoding: how many tokens a verify step yields.
 *
 * A proposer (a draft model, or an MTP head) guesses k tokens; one pass of the model over the
 * last token and the k guesses checks them all. Guess i is kept only if guesses 1..i-1 were,
 * with probability a_i (the acceptance rate of position i; one rate a for all: i.i.d.), and the
 * pass always yields one token of its own after the kept ones (the correction or the bonus
 * token). So a step yields 1 + n tokens, n the guesses kept in a row: 1 + sum_i a_1 ... a_i on
 * average (Leviathan et al. 2023, eq. 1, for i.i.d.: (1 - a^(k+1)) / (1 - a)). Each step draws n
 * from the workload's seed, so runs repeat exactly. */
#include "serving/serving_internal.h"

static double srv_spec_rate(const cfg_speculative *sp, int i)
{
  return sp->nprofile > 0 ? sp->profile[i] : sp->acceptance;
}

double srv_spec_expected_tokens(const cfg_speculative *sp)
{
  if (sp->method == CFG_SPEC_NONE)
    return 1;
  double kept = 1, sum = 1;
  for (int i = 0; i < sp->tokens; i++) {
    kept *= srv_spec_rate(sp, i);
    sum += kept;
  }
  return sum;
}

int srv_spec_draw(const cfg_speculative *sp, GRand *g)
{
  int n = 1;
  for (int i = 0; i < sp->tokens && g_rand_double(g) < srv_spec_rate(sp, i); i++)
    n++;
  return n;
}
