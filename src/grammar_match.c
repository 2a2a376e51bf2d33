/* The lazily built grammar automaton (grammar_match.h): hash-consed stacks, interned states, per-state
 * code point partitions and their transitions. */
#include "grammar_match.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

static int is_close(uint32_t kind) { return kind == ELI_GSYM_END || kind == ELI_GSYM_ALT; }

/* Records the first limit or allocation failure; the machine refuses work from then on (its tables
 * may be half-updated). Returns ELI_GM_ERROR for convenience. */
static uint32_t fail(eli_grammar_machine *m, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static uint32_t fail(eli_grammar_machine *m, int code, const char *fmt, ...) {
    if (!m->failed) {
        char msg[sizeof m->err.msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        eli_fail(&m->err, code, "grammar: %s", msg);
        m->failed = 1;
    }
    return ELI_GM_ERROR;
}

static uint32_t oom(eli_grammar_machine *m) { return fail(m, ELI_ERR_OOM, "out of memory"); }

static int grow(void **v, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 4 / elem) return -1;
        c *= 2;
    }
    void *n = realloc(*v, c * elem);
    if (!n) return -1;
    *v = n;
    *cap = c;
    return 0;
}

static int grow32(void **v, uint32_t *cap, size_t need, size_t elem) {
    size_t c = *cap;
    if (need > UINT32_MAX / 2 || grow(v, &c, need, elem)) return -1;
    *cap = (uint32_t)c;
    return 0;
}

static uint32_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* ---- stack nodes ------------------------------------------------------------------------------ */

static int rehash(uint32_t **table, uint32_t *cap, uint32_t n_items, uint32_t (*key)(const eli_grammar_machine *, uint32_t),
                  const eli_grammar_machine *m) {
    uint32_t c = *cap ? *cap : 1024;
    while ((uint64_t)n_items * 2 >= c) c *= 2;
    if (c == *cap) return 0;
    uint32_t *t = calloc(c, sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < *cap; i++) {
        uint32_t v = (*table)[i];
        if (!v) continue;
        uint32_t h = key(m, v - 1) & (c - 1);
        while (t[h]) h = (h + 1) & (c - 1);
        t[h] = v;
    }
    free(*table);
    *table = t;
    *cap = c;
    return 0;
}

static uint32_t node_hash(uint32_t pos, uint32_t parent) { return mix((uint64_t)pos << 32 | parent); }
static uint32_t node_key(const eli_grammar_machine *m, uint32_t id) { return node_hash(m->nodes[id].pos, m->nodes[id].parent); }

/* The node (pos on top of parent), made on first use. */
static uint32_t node_get(eli_grammar_machine *m, uint32_t pos, uint32_t parent) {
    if (m->failed) return ELI_GM_ERROR;
    if ((uint64_t)(m->n_nodes + 1) * 2 >= m->node_table_cap &&
        rehash(&m->node_table, &m->node_table_cap, m->n_nodes + 1, node_key, m))
        return oom(m);
    uint32_t mask = m->node_table_cap - 1, h = node_hash(pos, parent) & mask;
    for (; m->node_table[h]; h = (h + 1) & mask) {
        const eli_gm_node *n = &m->nodes[m->node_table[h] - 1];
        if (n->pos == pos && n->parent == parent) return m->node_table[h] - 1;
    }
    if (m->n_nodes >= ELI_GM_MAX_NODES)
        return fail(m, ELI_ERR_INVALID_ARG, "the grammar needs more than %u parse stack nodes", ELI_GM_MAX_NODES);
    if (m->n_nodes == m->cap_nodes) {
        uint32_t cap = m->cap_nodes;
        if (grow32((void **)&m->nodes, &cap, (size_t)m->n_nodes + 1, sizeof *m->nodes)) return oom(m);
        uint32_t *seen = realloc(m->seen, (size_t)cap * sizeof *seen);
        if (!seen) return oom(m);
        memset(seen + m->cap_nodes, 0, (size_t)(cap - m->cap_nodes) * sizeof *seen);
        m->seen = seen;
        m->cap_nodes = cap;
    }
    uint32_t id = m->n_nodes++;
    m->nodes[id] = (eli_gm_node){pos, parent};
    m->node_table[h] = id + 1;
    return id;
}

/* ---- states ----------------------------------------------------------------------------------- */

static uint32_t nodes_hash(const uint32_t *v, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ v[i]) * 0x100000001b3ull;
    return mix(h);
}
static uint32_t state_key(const eli_grammar_machine *m, uint32_t id) {
    return nodes_hash(m->state_nodes + m->states[id].first, m->states[id].n);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The state of the node set v[0..n) (sorted and deduplicated here, in place). */
static uint32_t intern(eli_grammar_machine *m, uint32_t *v, size_t n) {
    if (m->failed) return ELI_GM_ERROR;
    if (n == 0) return ELI_GM_DEAD;
    if (n < 16) { /* most sets are tiny: insertion sort */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
                uint32_t t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
    } else {
        qsort(v, n, sizeof *v, cmp_u32);
    }
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1]) v[k++] = v[i];
    n = k;
    if (n > ELI_GM_MAX_STACKS)
        return fail(m, ELI_ERR_INVALID_ARG, "the grammar is too ambiguous: more than %u parse stacks at once",
                    ELI_GM_MAX_STACKS);
    if ((uint64_t)(m->n_states + 1) * 2 >= m->state_table_cap &&
        rehash(&m->state_table, &m->state_table_cap, m->n_states + 1, state_key, m))
        return oom(m);
    uint32_t mask = m->state_table_cap - 1, h = nodes_hash(v, (uint32_t)n) & mask;
    for (; m->state_table[h]; h = (h + 1) & mask) {
        const eli_gm_state *s = &m->states[m->state_table[h] - 1];
        if (s->n == n && !memcmp(m->state_nodes + s->first, v, n * sizeof *v)) return m->state_table[h] - 1;
    }
    if (m->n_state_nodes + n > ELI_GM_MAX_STATE_NODES)
        return fail(m, ELI_ERR_INVALID_ARG, "the grammar needs more than %u parse stacks in all its states",
                    ELI_GM_MAX_STATE_NODES);
    if (grow((void **)&m->state_nodes, &m->cap_state_nodes, m->n_state_nodes + n, sizeof *m->state_nodes) ||
        grow32((void **)&m->states, &m->cap_states, (size_t)m->n_states + 1, sizeof *m->states))
        return oom(m);
    uint32_t id = m->n_states++;
    eli_gm_state *s = &m->states[id];
    s->first = (uint32_t)m->n_state_nodes;
    s->n = (uint32_t)n;
    s->part = NULL;
    s->complete = v[0] == 0;
    s->has_tokens = 0;
    for (size_t i = s->complete; i < n; i++) {
        uint32_t kind = m->g->syms[m->nodes[v[i]].pos].kind;
        if (kind == ELI_GSYM_TOKEN || kind == ELI_GSYM_TOKEN_NOT) s->has_tokens = 1;
    }
    memcpy(m->state_nodes + m->n_state_nodes, v, n * sizeof *v);
    m->n_state_nodes += n;
    m->state_table[h] = id + 1;
    return id;
}

/* ---- transitions ------------------------------------------------------------------------------ */

static int push(eli_grammar_machine *m, uint32_t **v, size_t *cap, size_t *n, uint32_t x) {
    if (grow((void **)v, cap, *n + 1, sizeof **v)) return (int)oom(m);
    (*v)[(*n)++] = x;
    return 0;
}

static void new_generation(eli_grammar_machine *m) {
    if (++m->gen == 0) { /* wrapped: forget every old mark */
        memset(m->seen, 0, (size_t)m->cap_nodes * sizeof *m->seen);
        m->gen = 1;
    }
}

/* The stack left when the symbol at pos (on top of parent) has been matched. */
static uint32_t after(eli_grammar_machine *m, uint32_t pos, uint32_t parent) {
    return is_close(m->g->syms[pos + 1].kind) ? parent : node_get(m, pos + 1, parent);
}

/* Expands stack x until every top is a terminal or the stack is empty, adding those stacks to m->out
 * (a stack already visited in this generation is skipped: its results are there). */
static int expand(eli_grammar_machine *m, uint32_t x, size_t *n_out) {
    const eli_grammar *g = m->g;
    size_t n_work = 0;
    if (x == ELI_GM_ERROR || push(m, &m->work, &m->cap_work, &n_work, x)) return -1;
    while (n_work) {
        x = m->work[--n_work];
        if (m->seen[x] == m->gen) continue;
        m->seen[x] = m->gen;
        if (x == 0 || g->syms[m->nodes[x].pos].kind != ELI_GSYM_RULE) {
            if (push(m, &m->out, &m->cap_out, n_out, x)) return -1;
            if (*n_out > ELI_GM_MAX_STACKS)
                return (int)fail(m, ELI_ERR_INVALID_ARG, "the grammar is too ambiguous: more than %u parse stacks at once",
                                 ELI_GM_MAX_STACKS);
            continue;
        }
        eli_gm_node nd = m->nodes[x];
        uint32_t base = after(m, nd.pos, nd.parent);
        if (base == ELI_GM_ERROR) return -1;
        for (uint32_t a = g->rule_start[g->syms[nd.pos].value];; a++) { /* each alternative */
            uint32_t top = is_close(g->syms[a].kind) ? base : node_get(m, a, base);
            if (top == ELI_GM_ERROR || push(m, &m->work, &m->cap_work, &n_work, top)) return -1;
            while (!is_close(g->syms[a].kind)) a++;
            if (g->syms[a].kind == ELI_GSYM_END) break;
        }
    }
    return 0;
}

typedef int (*top_test)(const eli_grammar *g, eli_gsym top, uint32_t arg);

static int takes_cp(const eli_grammar *g, eli_gsym top, uint32_t cp) {
    return top.kind == ELI_GSYM_CLASS && eli_gclass_has(g, &g->classes[top.value], cp);
}

static int takes_token(const eli_grammar *g, eli_gsym top, uint32_t token) {
    (void)g;
    return (top.kind == ELI_GSYM_TOKEN && top.value == token) || (top.kind == ELI_GSYM_TOKEN_NOT && top.value != token);
}

/* The state after every stack of `state` whose top passes test(arg) has matched that top. */
static uint32_t step(eli_grammar_machine *m, uint32_t state, top_test test, uint32_t arg) {
    if (m->failed) return ELI_GM_ERROR;
    if (state == ELI_GM_DEAD) return ELI_GM_DEAD;
    new_generation(m);
    size_t n_out = 0;
    const eli_gm_state *s = &m->states[state];
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t x = m->state_nodes[m->states[state].first + i]; /* re-read: node_get may move arrays */
        if (x == 0 || !test(m->g, m->g->syms[m->nodes[x].pos], arg)) continue;
        eli_gm_node nd = m->nodes[x];
        if (expand(m, after(m, nd.pos, nd.parent), &n_out)) return ELI_GM_ERROR;
        s = &m->states[state];
    }
    return intern(m, m->out, n_out);
}

uint32_t eli_gm_next_token(eli_grammar_machine *m, uint32_t state, int32_t token) {
    if (state == ELI_GM_DEAD || m->failed || !m->states[state].has_tokens) return m->failed ? ELI_GM_ERROR : ELI_GM_DEAD;
    return step(m, state, takes_token, (uint32_t)token);
}

uint32_t eli_gm_union(eli_grammar_machine *m, uint32_t a, uint32_t b) {
    if (m->failed || a == ELI_GM_ERROR || b == ELI_GM_ERROR) return ELI_GM_ERROR;
    if (a == ELI_GM_DEAD || a == b) return b;
    if (b == ELI_GM_DEAD) return a;
    size_t n = 0;
    const eli_gm_state *sa = &m->states[a], *sb = &m->states[b];
    for (uint32_t i = 0; i < sa->n; i++)
        if (push(m, &m->out, &m->cap_out, &n, m->state_nodes[sa->first + i])) return ELI_GM_ERROR;
    for (uint32_t i = 0; i < sb->n; i++)
        if (push(m, &m->out, &m->cap_out, &n, m->state_nodes[sb->first + i])) return ELI_GM_ERROR;
    return intern(m, m->out, n);
}

/* ---- partitions ------------------------------------------------------------------------------- */

/* Splits the code points into groups that every class on top of a stack of `state` treats alike
 * (so they share a next state): partition refinement, one class at a time, over the 128 ASCII code
 * points and the intervals between the classes' range ends above them. */
static eli_gm_partition *build_partition(eli_grammar_machine *m, uint32_t state) {
    const eli_grammar *g = m->g;
    const eli_gm_state *s = &m->states[state];
    /* the distinct classes on top */
    size_t n_cls = 0;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t x = m->state_nodes[s->first + i];
        if (x == 0) continue;
        eli_gsym top = g->syms[m->nodes[x].pos];
        if (top.kind == ELI_GSYM_CLASS && push(m, &m->work, &m->cap_work, &n_cls, top.value)) return NULL;
    }
    qsort(m->work, n_cls, sizeof *m->work, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < n_cls; i++)
        if (!k || m->work[i] != m->work[k - 1]) m->work[k++] = m->work[i];
    n_cls = k;
    /* interval starts above ASCII: 128 and every range's ends, sorted and unique */
    size_t n_b = 0;
    if (push(m, &m->out, &m->cap_out, &n_b, 128)) return NULL;
    for (size_t c = 0; c < n_cls; c++) {
        const eli_gclass *cl = &g->classes[m->work[c]];
        for (uint32_t r = 0; r < cl->n; r++) {
            eli_grange rg = g->ranges[cl->first + r];
            if (rg.hi < 128) continue;
            if ((rg.lo > 128 && push(m, &m->out, &m->cap_out, &n_b, rg.lo)) ||
                (rg.hi < ELI_GRAMMAR_MAX_CODEPOINT && push(m, &m->out, &m->cap_out, &n_b, rg.hi + 1)))
                return NULL;
        }
    }
    qsort(m->out, n_b, sizeof *m->out, cmp_u32);
    k = 0;
    for (size_t i = 0; i < n_b; i++)
        if (!k || m->out[i] != m->out[k - 1]) m->out[k++] = m->out[i];
    n_b = k;
    /* items: 0..127 are the ASCII code points, 128 + i the interval starting at out[i] */
    size_t n_items = 128 + n_b;
    uint32_t *grp = calloc(n_items, sizeof *grp), *map = malloc(2 * n_items * sizeof *map);
    uint8_t *live = calloc(n_items, 1), *nlive = calloc(n_items, 1); /* live: matched some class */
    eli_gm_partition *p = NULL;
    uint32_t n_grp = 1;
    if (!grp || !map || !live || !nlive) goto fail_oom;
    for (size_t c = 0; c < n_cls; c++) {
        const eli_gclass *cl = &g->classes[m->work[c]];
        memset(map, 0xFF, 2 * (size_t)n_grp * sizeof *map);
        uint32_t next_n = 0;
        for (size_t i = 0; i < n_items; i++) {
            uint32_t cp = i < 128 ? (uint32_t)i : m->out[i - 128];
            uint32_t in = (uint32_t)eli_gclass_has(g, cl, cp);
            uint32_t *slot = &map[2 * grp[i] + in];
            if (*slot == UINT32_MAX) {
                *slot = next_n++;
                nlive[*slot] = live[grp[i]] | (uint8_t)in;
            }
            grp[i] = *slot;
        }
        uint8_t *t = live;
        live = nlive;
        nlive = t;
        n_grp = next_n;
    }
    if (n_grp > ELI_GM_MAX_GROUPS) {
        fail(m, ELI_ERR_INVALID_ARG, "more than %u distinct character groups at one point", ELI_GM_MAX_GROUPS);
        goto out;
    }
    size_t n_iv = 0; /* neighbouring intervals of one group merge */
    for (size_t i = 0; i < n_b; i++)
        if (i == 0 || grp[128 + i] != grp[128 + i - 1]) n_iv++;
    size_t bytes = sizeof *p + n_grp * sizeof *p->groups + n_iv * (sizeof *p->iv_lo + sizeof *p->iv_group);
    if (m->part_bytes + bytes > ELI_GM_MAX_PART_BYTES) {
        fail(m, ELI_ERR_INVALID_ARG, "the grammar needs more than %u MiB of character tables", ELI_GM_MAX_PART_BYTES >> 20);
        goto out;
    }
    p = malloc(bytes);
    if (!p) goto fail_oom;
    m->part_bytes += bytes;
    p->state = state;
    p->n_iv = (uint32_t)n_iv;
    p->n_groups = n_grp;
    p->groups = (eli_gm_group *)(p + 1);
    p->iv_lo = (uint32_t *)(p->groups + n_grp);
    p->iv_group = (uint16_t *)(p->iv_lo + n_iv);
    for (uint32_t i = 0; i < n_grp; i++)
        p->groups[i] = (eli_gm_group){live[i] ? ELI_GM_UNKNOWN : ELI_GM_DEAD, UINT32_MAX, {0, 0}};
    for (uint32_t c = 0; c < 128; c++) {
        eli_gm_group *gr = &p->groups[grp[c]];
        p->ascii[c] = (uint16_t)grp[c];
        gr->ascii[c >> 6] |= 1ull << (c & 63);
        if (gr->rep == UINT32_MAX) gr->rep = c;
    }
    for (size_t i = 0, j = 0; i < n_b; i++) {
        uint32_t gi = grp[128 + i];
        if (p->groups[gi].rep == UINT32_MAX) p->groups[gi].rep = m->out[i];
        if (i == 0 || gi != grp[128 + i - 1]) {
            p->iv_lo[j] = m->out[i];
            p->iv_group[j++] = (uint16_t)gi;
        }
    }
    m->states[state].part = p;
    goto out;
fail_oom:
    oom(m);
out:
    free(grp), free(map), free(live), free(nlive);
    return m->failed ? NULL : p;
}

eli_gm_partition *eli_gm_partition_of(eli_grammar_machine *m, uint32_t state) {
    if (m->failed) return NULL;
    eli_gm_partition *p = m->states[state].part;
    return p ? p : build_partition(m, state);
}

uint32_t eli_gm_group_next(eli_grammar_machine *m, eli_gm_partition *p, uint32_t gi) {
    if (p->groups[gi].next == ELI_GM_UNKNOWN) {
        uint32_t next = step(m, p->state, takes_cp, p->groups[gi].rep);
        if (next == ELI_GM_ERROR) return next;
        p->groups[gi].next = next;
    }
    return p->groups[gi].next;
}

uint32_t eli_gm_next(eli_grammar_machine *m, uint32_t state, uint32_t cp) {
    if (state == ELI_GM_DEAD) return ELI_GM_DEAD;
    eli_gm_partition *p = eli_gm_partition_of(m, state);
    if (!p) return ELI_GM_ERROR;
    return eli_gm_group_next(m, p, eli_gm_group_of(p, cp));
}

/* ---- bytes ------------------------------------------------------------------------------------ */

/* The code points that complete the UTF-8 prefix held in pos (an interval: the shortest-form and
 * surrogate rules only ever cut its ends). */
static void completions(eli_grammar_pos pos, uint32_t *lo, uint32_t *hi) {
    unsigned char lo2 = 0x80, hi2 = 0xBF;
    int len = eli_utf8_lead(pos.partial[0], &lo2, &hi2);
    uint32_t v = pos.partial[0] & (0x7Fu >> len);
    for (int i = 1; i < pos.n_partial; i++) v = v << 6 | (pos.partial[i] & 0x3Fu);
    int rest = len - pos.n_partial; /* bytes still to come, >= 1 */
    uint32_t a = v << (6 * rest), b = a | ((1u << (6 * rest)) - 1);
    if (pos.n_partial == 1) { /* the second byte is restricted to lo2..hi2 */
        a = v << (6 * rest) | (uint32_t)(lo2 & 0x3F) << (6 * (rest - 1));
        b = v << (6 * rest) | (uint32_t)(hi2 & 0x3F) << (6 * (rest - 1)) | ((1u << (6 * (rest - 1))) - 1);
    }
    *lo = a;
    *hi = b;
}

int eli_gm_partial_viable(eli_grammar_machine *m, eli_grammar_pos pos) {
    uint32_t lo, hi;
    completions(pos, &lo, &hi);
    eli_gm_partition *p = eli_gm_partition_of(m, pos.state);
    if (!p) return -1;
    for (uint32_t i = 0; i < p->n_iv; i++) { /* few intervals: a scan is enough */
        uint32_t end = i + 1 < p->n_iv ? p->iv_lo[i + 1] - 1 : ELI_GRAMMAR_MAX_CODEPOINT;
        if (end < lo || p->iv_lo[i] > hi) continue;
        uint32_t next = eli_gm_group_next(m, p, p->iv_group[i]);
        if (next == ELI_GM_ERROR) return -1;
        if (next != ELI_GM_DEAD) return 1;
    }
    return 0;
}

/* One byte: 1 taken, 0 refused, -1 error. */
static int accept_byte(eli_grammar_machine *m, eli_grammar_pos *pos, unsigned char b) {
    uint32_t cp;
    if (pos->n_partial == 0) {
        unsigned char lo2, hi2;
        int len = eli_utf8_lead(b, &lo2, &hi2);
        if (len == 0) return 0;
        if (len > 1) {
            eli_grammar_pos t = *pos;
            t.partial[t.n_partial++] = b;
            int ok = eli_gm_partial_viable(m, t);
            if (ok == 1) *pos = t;
            return ok;
        }
        cp = b;
    } else {
        unsigned char lo2 = 0x80, hi2 = 0xBF;
        int len = eli_utf8_lead(pos->partial[0], &lo2, &hi2);
        if (pos->n_partial > 1) lo2 = 0x80, hi2 = 0xBF;
        if (b < lo2 || b > hi2) return 0;
        eli_grammar_pos t = *pos;
        if (t.n_partial + 1 < len) {
            t.partial[t.n_partial++] = b;
            int ok = eli_gm_partial_viable(m, t);
            if (ok == 1) *pos = t;
            return ok;
        }
        unsigned char buf[4];
        memcpy(buf, t.partial, t.n_partial);
        buf[t.n_partial] = b;
        if (!eli_utf8_decode(buf, (size_t)len, &cp)) return 0; /* cannot happen: every byte was checked */
    }
    uint32_t next = eli_gm_next(m, pos->state, cp);
    if (next == ELI_GM_ERROR) return -1;
    if (next == ELI_GM_DEAD) return 0;
    pos->state = next;
    pos->n_partial = 0;
    return 1;
}

int eli_grammar_accept_bytes(eli_grammar_machine *m, eli_grammar_pos *pos, const char *s, size_t n, eli_error *err) {
    eli_grammar_pos t = *pos;
    for (size_t i = 0; i < n; i++) {
        int ok = m->failed ? -1 : accept_byte(m, &t, (unsigned char)s[i]);
        if (ok < 0) return eli_fail(err, m->err.code, "%s", m->err.msg);
        if (ok == 0) return 0;
    }
    *pos = t;
    return 1;
}

int eli_grammar_is_complete(const eli_grammar_machine *m, eli_grammar_pos pos) {
    return pos.n_partial == 0 && pos.state != ELI_GM_DEAD && m->states[pos.state].complete;
}

eli_grammar_pos eli_grammar_start(const eli_grammar_machine *m) {
    eli_grammar_pos p = {m->start, 0, {0, 0, 0}};
    return p;
}

/* ---- the machine ------------------------------------------------------------------------------ */

void eli_grammar_machine_free(eli_grammar_machine *m) {
    if (!m) return;
    for (uint32_t i = 0; i < m->n_states; i++) free(m->states[i].part);
    free(m->nodes);
    free(m->node_table);
    free(m->states);
    free(m->state_nodes);
    free(m->state_table);
    free(m->seen);
    free(m->work);
    free(m->out);
    free(m);
}

int eli_grammar_machine_new(const eli_grammar *g, eli_grammar_machine **out, eli_error *err) {
    *out = NULL;
    eli_grammar_machine *m = calloc(1, sizeof *m);
    if (!m) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    m->g = g;
    /* node 0: the empty stack (never hashed: nothing is "on" it); state 0: the empty set */
    uint32_t cap = 0;
    if (grow32((void **)&m->nodes, &cap, 1024, sizeof *m->nodes) || !(m->seen = calloc(cap, sizeof *m->seen)) ||
        grow32((void **)&m->states, &m->cap_states, 64, sizeof *m->states)) {
        eli_grammar_machine_free(m);
        return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    }
    m->cap_nodes = cap;
    m->nodes[0] = (eli_gm_node){UINT32_MAX, UINT32_MAX};
    m->n_nodes = 1;
    m->states[0] = (eli_gm_state){0, 0, NULL, 0, 0};
    m->n_states = 1;
    /* the start: each alternative of root on the empty stack */
    new_generation(m);
    size_t n_out = 0;
    for (uint32_t a = g->rule_start[g->root];; a++) {
        uint32_t top = is_close(g->syms[a].kind) ? 0 : node_get(m, a, 0);
        if (expand(m, top, &n_out)) break;
        while (!is_close(g->syms[a].kind)) a++;
        if (g->syms[a].kind == ELI_GSYM_END) break;
    }
    m->start = m->failed ? ELI_GM_ERROR : intern(m, m->out, n_out);
    if (m->start == ELI_GM_ERROR || m->start == ELI_GM_DEAD) {
        int code = m->failed ? m->err.code : ELI_ERR_INVALID_ARG;
        if (m->failed) eli_fail(err, code, "%s", m->err.msg);
        else eli_fail(err, code, "grammar: rule 'root' can never start (it only refers to itself)");
        eli_grammar_machine_free(m);
        return code;
    }
    *out = m;
    return ELI_OK;
}

/* ---- serialised positions --------------------------------------------------------------------- */

#define POS_MAGIC 0x53504745u /* "EGPS" */
#define POS_VERSION 1u

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Layout, little-endian u32 words: magic, version, fingerprint (low, high), n_partial | partial bytes
 * << 8, number of stacks, then each stack as its depth and its positions from the top down. */
size_t eli_grammar_pos_size(const eli_grammar_machine *m, eli_grammar_pos pos) {
    const eli_gm_state *s = &m->states[pos.state];
    size_t words = 6;
    for (uint32_t i = 0; i < s->n; i++) {
        words++;
        for (uint32_t x = m->state_nodes[s->first + i]; x != 0; x = m->nodes[x].parent) words++;
    }
    return words * 4;
}

void eli_grammar_pos_write(const eli_grammar_machine *m, eli_grammar_pos pos, uint8_t *b) {
    const eli_gm_state *s = &m->states[pos.state];
    size_t w = 0;
    put32(b + 4 * w++, POS_MAGIC);
    put32(b + 4 * w++, POS_VERSION);
    put32(b + 4 * w++, (uint32_t)m->g->fingerprint);
    put32(b + 4 * w++, (uint32_t)(m->g->fingerprint >> 32));
    put32(b + 4 * w++, pos.n_partial | (uint32_t)pos.partial[0] << 8 | (uint32_t)pos.partial[1] << 16 |
                           (uint32_t)pos.partial[2] << 24);
    put32(b + 4 * w++, s->n);
    for (uint32_t i = 0; i < s->n; i++) {
        size_t depth_at = w++;
        uint32_t depth = 0;
        for (uint32_t x = m->state_nodes[s->first + i]; x != 0; x = m->nodes[x].parent, depth++)
            put32(b + 4 * w++, m->nodes[x].pos);
        put32(b + 4 * depth_at, depth);
    }
}

int eli_grammar_pos_save(const eli_grammar_machine *m, eli_grammar_pos pos, uint8_t **out, size_t *len, eli_error *err) {
    *len = eli_grammar_pos_size(m, pos);
    *out = malloc(*len);
    if (!*out) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    eli_grammar_pos_write(m, pos, *out);
    return ELI_OK;
}

int eli_grammar_pos_load(eli_grammar_machine *m, const uint8_t *data, size_t len, eli_grammar_pos *pos, eli_error *err) {
    const eli_grammar *g = m->g;
    if (m->failed) return eli_fail(err, m->err.code, "%s", m->err.msg);
    if (len % 4 || len < 24 || get32(data) != POS_MAGIC)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: not a saved grammar position");
    if (get32(data + 4) != POS_VERSION)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: version %u, expected %u", get32(data + 4), POS_VERSION);
    if (((uint64_t)get32(data + 12) << 32 | get32(data + 8)) != g->fingerprint)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: saved for a different grammar");
    size_t words = len / 4, w = 6;
    uint32_t part = get32(data + 16), n_stacks = get32(data + 20);
    eli_grammar_pos p = {ELI_GM_DEAD, (uint8_t)(part & 0xFF), {(uint8_t)(part >> 8), (uint8_t)(part >> 16), (uint8_t)(part >> 24)}};
    if (p.n_partial > 3) return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: %u pending UTF-8 bytes", p.n_partial);
    for (int i = 0; i < p.n_partial; i++) { /* a proper prefix of a valid character, zeros after it */
        unsigned char lo2 = 0x80, hi2 = 0xBF;
        int len0 = eli_utf8_lead(p.partial[0], &lo2, &hi2);
        if (i > 1) lo2 = 0x80, hi2 = 0xBF;
        if (i == 0 ? len0 <= p.n_partial : (p.partial[i] < lo2 || p.partial[i] > hi2))
            return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: bad pending UTF-8 bytes");
    }
    for (int i = p.n_partial; i < 3; i++)
        if (p.partial[i]) return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: bad pending UTF-8 bytes");
    if (n_stacks == 0 || n_stacks > ELI_GM_MAX_STACKS)
        return eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: %u stacks", n_stacks);
    uint32_t *tops = malloc((size_t)n_stacks * sizeof *tops);
    if (!tops) return eli_fail(err, ELI_ERR_OOM, "grammar: out of memory");
    int rc = ELI_OK;
    for (uint32_t i = 0; i < n_stacks && !rc; i++) {
        uint32_t depth = w < words ? get32(data + 4 * w++) : UINT32_MAX;
        if (depth > words - w) {
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: truncated");
            break;
        }
        uint32_t x = 0; /* built from the bottom up */
        for (uint32_t d = depth; d-- > 0 && !rc;) {
            uint32_t at = get32(data + 4 * (w + d));
            uint32_t kind = at < g->n_syms ? g->syms[at].kind : ELI_GSYM_END;
            int top_ok = d > 0 || kind == ELI_GSYM_CLASS || kind == ELI_GSYM_TOKEN || kind == ELI_GSYM_TOKEN_NOT;
            if (is_close(kind) || !top_ok)
                rc = eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: position %u is not a grammar position", at);
            else if ((x = node_get(m, at, x)) == ELI_GM_ERROR)
                rc = eli_fail(err, m->err.code, "%s", m->err.msg);
        }
        w += depth;
        tops[i] = x;
    }
    if (!rc && w != words) rc = eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: %zu trailing bytes", (words - w) * 4);
    if (!rc) {
        p.state = intern(m, tops, n_stacks);
        if (p.state == ELI_GM_ERROR) rc = eli_fail(err, m->err.code, "%s", m->err.msg);
        else if (p.n_partial && eli_gm_partial_viable(m, p) != 1)
            rc = eli_fail(err, ELI_ERR_INVALID_ARG, "grammar state: the pending UTF-8 bytes cannot continue");
    }
    free(tops);
    if (!rc) *pos = p;
    return rc;
}
