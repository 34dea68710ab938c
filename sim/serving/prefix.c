/* The prefix cache of a replica: vLLM's automatic prefix caching and SGLang's RadixAttention at
 * the granularity of KV blocks.
 *
 * A block is named by where its tokens come from and its position: the blocks wholly inside a
 * group's shared prefix by (group, position), every other block by (group, conversation,
 * position). A conversation's turns repeat its earlier tokens at the same positions, so a name
 * fixes every token up to the block's end: a lookup by name is a walk down a radix tree of
 * blocks, and a hash table of names is that tree. Only full blocks are cached, as the engines
 * do. A block in use by a running request is pinned; when its last user lets go it joins the
 * GPU tier's LRU queue, deepest block of the request first so that leaves go before their
 * parents. An evicted block moves to the host tier when there is one (inclusive: a block brought
 * back keeps its host copy), and a host hit costs its KV over the host link before the
 * iteration that admits the request. Writing to host memory overlaps the GPU's work (the
 * engines offload asynchronously) and costs nothing here. */
#include "serving/serving_internal.h"

#include <math.h>

typedef struct {
  int group, conv, index;
} srv_block_key;

typedef struct {
  srv_block_key key;
  int ref;             /* running requests using it */
  bool gpu, host;      /* where copies are */
  GList gpu_link;      /* in the GPU LRU queue while on the GPU and unused */
  GList host_link;     /* in the host LRU queue while in host memory */
} srv_block;

struct srv_prefix_cache {
  GHashTable *blocks;  /* srv_block_key* -> srv_block* (the key lives in the block) */
  GQueue gpu_lru, host_lru; /* least recently used at the head */
  int host_capacity;   /* blocks */
};

static guint srv_key_hash(gconstpointer p)
{
  const srv_block_key *k = p;
  return (guint)k->group * 73856093u ^ (guint)k->conv * 19349663u ^ (guint)k->index * 83492791u;
}

static gboolean srv_key_equal(gconstpointer a, gconstpointer b)
{
  const srv_block_key *x = a, *y = b;
  return x->group == y->group && x->conv == y->conv && x->index == y->index;
}

srv_prefix_cache *srv_prefix_new(int host_blocks)
{
  srv_prefix_cache *c = g_new0(srv_prefix_cache, 1);
  c->blocks = g_hash_table_new_full(srv_key_hash, srv_key_equal, NULL, g_free);
  g_queue_init(&c->gpu_lru);
  g_queue_init(&c->host_lru);
  c->host_capacity = MAX(host_blocks, 0);
  return c;
}

void srv_prefix_free(srv_prefix_cache *c)
{
  if (!c)
    return;
  g_hash_table_destroy(c->blocks);
  g_free(c);
}

int srv_prefix_idle(const srv_replica *rep)
{
  return rep->cache ? (int)rep->cache->gpu_lru.length : 0;
}

static srv_block_key srv_key_of(const srv_sim *s, const srv_request *r, int index)
{
  int bs = s->cap.block_size;
  bool shared = r->group >= 0 && (index + 1) * bs <= s->cfg->requests.prefix_tokens;
  return (srv_block_key){.group = r->group, .conv = shared ? -1 : r->conv, .index = index};
}

static srv_block *srv_block_of(const srv_sim *s, const srv_replica *rep, const srv_request *r,
                               int index)
{
  srv_block_key k = srv_key_of(s, r, index);
  return g_hash_table_lookup(rep->cache->blocks, &k);
}

static void srv_forget(srv_prefix_cache *c, srv_block *b)
{
  if (!b->gpu && !b->host)
    g_hash_table_remove(c->blocks, &b->key);
}

/* Host memory keeps the block, dropping its own least recently used block if full. */
static void srv_offload(srv_sim *s, srv_prefix_cache *c, srv_block *b)
{
  if (b->host) {
    g_queue_unlink(&c->host_lru, &b->host_link);
    g_queue_push_tail_link(&c->host_lru, &b->host_link);
    return;
  }
  if (c->host_capacity == 0)
    return;
  if ((int)c->host_lru.length >= c->host_capacity) {
    GList *old = g_queue_pop_head_link(&c->host_lru);
    srv_block *victim = old->data;
    victim->host = false;
    srv_forget(c, victim);
  }
  b->host = true;
  b->host_link.data = b;
  g_queue_push_tail_link(&c->host_lru, &b->host_link);
  s->prefix.offloaded++;
}

static void srv_evict_one(srv_sim *s, srv_prefix_cache *c)
{
  GList *l = g_queue_pop_head_link(&c->gpu_lru);
  srv_block *b = l->data;
  b->gpu = false;
  s->prefix.evicted++;
  srv_offload(s, c, b);
  srv_forget(c, b);
}

void srv_take_blocks(srv_sim *s, srv_replica *rep, int n)
{
  srv_prefix_cache *c = rep->cache;
  if (c)
    while (rep->free_blocks - (int)c->gpu_lru.length < n && c->gpu_lru.length)
      srv_evict_one(s, c);
  rep->free_blocks -= n;
}

static void srv_ref(srv_replica *rep, srv_block *b)
{
  if (b->ref++ == 0) {
    g_queue_unlink(&rep->cache->gpu_lru, &b->gpu_link);
    rep->free_blocks--;
  }
}

static void srv_unref(srv_replica *rep, srv_block *b)
{
  if (--b->ref > 0)
    return;
  b->gpu_link.data = b;
  g_queue_push_tail_link(&rep->cache->gpu_lru, &b->gpu_link);
  rep->free_blocks++;
}

/* A block only in host memory comes back into a GPU block of its own. It is marked in use
 * first: making room may push other blocks to host memory, and they must not push it out. */
static bool srv_bring_back(srv_sim *s, srv_replica *rep, srv_block *b)
{
  if (rep->free_blocks < 1)
    return false;
  b->gpu = true;
  b->ref = 1;
  g_queue_unlink(&rep->cache->host_lru, &b->host_link);
  g_queue_push_tail_link(&rep->cache->host_lru, &b->host_link);
  srv_take_blocks(s, rep, 1);
  return true;
}

void srv_prefix_use(srv_sim *s, srv_replica *rep, srv_request *r)
{
  if (!rep->cache || r->ctx > 0)
    return;
  int most = (r->known - 1) / s->cap.block_size; /* the last token is always computed */
  int n = 0, host = 0;
  for (; n < most; n++) {
    srv_block *b = srv_block_of(s, rep, r, n);
    if (!b || (!b->gpu && !b->host))
      break;
    if (b->gpu)
      srv_ref(rep, b);
    else if (srv_bring_back(s, rep, b))
      host++;
    else
      break;
  }
  r->shared_blocks = n;
  r->host_blocks = host;
  r->ctx = n * s->cap.block_size;
}

void srv_prefix_drop(srv_sim *s, srv_replica *rep, const srv_request *r, int n)
{
  /* the deepest first, so that it is evicted before the blocks it extends */
  for (int i = n - 1; rep->cache && i >= 0; i--)
    srv_unref(rep, srv_block_of(s, rep, r, i));
}

void srv_prefix_release(srv_sim *s, srv_replica *rep, srv_request *r)
{
  srv_prefix_drop(s, rep, r, r->shared_blocks);
  r->shared_blocks = 0;
  r->host_blocks = 0;
}

int srv_prefix_held(const srv_sim *s, const srv_replica *rep, const srv_request *r)
{
  if (!rep->cache)
    return 0;
  int most = (r->known - 1) / s->cap.block_size, n = 0;
  while (n < most) {
    const srv_block *b = srv_block_of(s, rep, r, n);
    if (!b || !b->gpu)
      break;
    n++;
  }
  return n;
}

void srv_prefix_unuse(srv_sim *s, srv_replica *rep, srv_request *r)
{
  if (!rep->cache || r->blocks > 0 || r->reserved > 0)
    return;
  srv_prefix_release(s, rep, r);
  r->ctx = 0;
}

void srv_prefix_admitted(srv_sim *s, srv_lane *lane, srv_request *r, bool first)
{
  srv_replica *rep = srv_replica_of(s, lane);
  if (!rep->cache)
    return;
  double bs = s->cap.block_size, host = r->host_blocks * bs;
  double load = host * s->cap.kv_per_token / s->cfg->kv_offload.bandwidth;
  if (host > 0) {
    lane->pending_cost += load;
    s->prefix.host_load_s += load;
  }
  if (!first)
    return;
  s->prefix.prompt_tokens += r->prompt;
  s->prefix.gpu_hit_tokens += (r->shared_blocks - r->host_blocks) * bs;
  s->prefix.host_hit_tokens += host;
}

/* One of the request's own blocks becomes (or, a duplicate, gives way to) a cached block. */
static void srv_hand_over(srv_replica *rep, srv_request *r, bool duplicate)
{
  if (r->reserved > 0)
    r->reserved--;
  else
    r->blocks--;
  if (duplicate)
    rep->free_blocks++;
}

void srv_prefix_publish(srv_sim *s, srv_replica *rep, srv_request *r)
{
  if (!rep->cache)
    return;
  int bs = s->cap.block_size;
  while ((r->shared_blocks + 1) * bs <= r->ctx && (r->blocks > 0 || r->reserved > 0)) {
    srv_block *b = srv_block_of(s, rep, r, r->shared_blocks);
    if (b && b->gpu) {
      srv_hand_over(rep, r, true);
      srv_ref(rep, b);
    } else {
      if (!b) {
        b = g_new0(srv_block, 1);
        b->key = srv_key_of(s, r, r->shared_blocks);
        g_hash_table_insert(rep->cache->blocks, &b->key, b);
      }
      b->gpu = true;
      b->ref = 1;
      srv_hand_over(rep, r, false);
    }
    r->shared_blocks++;
  }
}
