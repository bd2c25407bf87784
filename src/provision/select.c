/* Selection, pure: which replacement capacity the displaced pods need, and where. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/provision.h"

static bool in_list(const char *const *list, const char *s)
{
        if (!list)
                return true;
        for (; *list; list++)
                if (streq(*list, s))
                        return true;
        return false;
}

static bool allowed(const struct prov_requirements *req, const struct prov_itype *t)
{
        static const char *const default_arch[] = { "x86_64", NULL };

        return in_list(req->families, t->family) && in_list(req->sizes, t->size) &&
               in_list(req->architectures ? req->architectures : default_arch, t->arch) &&
               (req->max_vcpu <= 0 || t->vcpu <= req->max_vcpu) &&
               (req->max_memory_mib <= 0 || t->memory_mib <= req->max_memory_mib);
}

static int type_cmp(const void *a, const void *b)
{
        const struct prov_itype *x = *(const struct prov_itype *const *)a;
        const struct prov_itype *y = *(const struct prov_itype *const *)b;
        if (x->vcpu != y->vcpu)
                return x->vcpu < y->vcpu ? -1 : 1;
        if (x->memory_mib != y->memory_mib)
                return x->memory_mib < y->memory_mib ? -1 : 1;
        return strcmp(x->name, y->name);
}

struct room {
        int64_t cpu, mem, pods;
};

static struct room type_room(const struct prov_itype *t)
{
        struct room r;
        prov_itype_allocatable(t, &r.cpu, &r.mem);
        r.pods = t->max_pods;
        return r;
}

/* Sort key for first-fit decreasing: the pod's larger share of the bin along either dimension. */
struct pod_key {
        size_t index;
        double share;
};

static int pod_key_cmp(const void *a, const void *b)
{
        const struct pod_key *x = a, *y = b;
        if (x->share != y->share)
                return x->share > y->share ? -1 : 1;
        return x->index < y->index ? -1 : (x->index > y->index);
}

void prov_selection_clear(struct prov_selection *s)
{
        for (size_t i = 0; i < s->n_bins; i++) {
                free(s->bins[i].pod_index);
                free(s->bins[i].types);
        }
        free(s->bins);
        *s = (struct prov_selection){};
}

static bool subnet_eligible(const struct prov_select_input *in, size_t i)
{
        if (isempty(in->interrupted_zone))
                return true;
        if (!streq(in->subnets[i].zone, in->interrupted_zone))
                return true;
        /* The interrupted zone only when it is all there is. */
        for (size_t j = 0; j < in->n_subnets; j++)
                if (!streq(in->subnets[j].zone, in->interrupted_zone))
                        return false;
        return true;
}

static int pack(const struct prov_select_input *in, struct room cap, struct prov_selection *sel)
{
        _cleanup_free_ struct pod_key *keys = calloc(in->n_pods ? in->n_pods : 1, sizeof(*keys));
        size_t n_keys = 0;

        if (!keys)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct prov_request *p = &in->pods[i];
                if (p->cpu_millis > cap.cpu || p->memory_bytes > cap.mem || cap.pods < 1) {
                        sel->pods_unplaceable++;
                        continue;
                }
                double c = cap.cpu > 0 ? (double)p->cpu_millis / (double)cap.cpu : 0;
                double m = cap.mem > 0 ? (double)p->memory_bytes / (double)cap.mem : 0;
                keys[n_keys++] = (struct pod_key){ .index = i, .share = c > m ? c : m };
        }
        qsort(keys, n_keys, sizeof(*keys), pod_key_cmp);
        for (size_t k = 0; k < n_keys; k++) {
                const struct prov_request *p = &in->pods[keys[k].index];
                struct prov_bin *b = NULL;
                for (size_t j = 0; j < sel->n_bins && !b; j++) {
                        struct prov_bin *c = &sel->bins[j];
                        if (c->total.cpu_millis + p->cpu_millis <= cap.cpu + in->daemonset.cpu_millis &&
                            c->total.memory_bytes + p->memory_bytes <=
                                cap.mem + in->daemonset.memory_bytes &&
                            (int64_t)c->pods + 1 <= cap.pods)
                                b = c;
                }
                if (!b) {
                        struct prov_bin *v = realloc(sel->bins, (sel->n_bins + 1) * sizeof(*v));
                        if (!v)
                                return -ENOMEM;
                        sel->bins = v;
                        b = &sel->bins[sel->n_bins++];
                        *b = (struct prov_bin){ .total = in->daemonset };
                }
                size_t *idx = realloc(b->pod_index, (b->pods + 1) * sizeof(*idx));
                if (!idx)
                        return -ENOMEM;
                b->pod_index = idx;
                b->pod_index[b->pods++] = keys[k].index;
                b->total.cpu_millis += p->cpu_millis;
                b->total.memory_bytes += p->memory_bytes;
        }
        return 0;
}

int prov_select(const struct prov_select_input *in, struct prov_selection *ret)
{
        _cleanup_free_ const struct prov_itype **cands = NULL;
        _cleanup_free_ unsigned *assigned = NULL;
        struct prov_selection sel = {};
        size_t n_cands = 0;
        int budget, r;

        if (!in || !in->catalog || !in->req || (in->n_pods > 0 && !in->pods) || in->n_subnets == 0 ||
            !in->subnets)
                return -EINVAL;
        for (size_t i = 0; i < in->n_subnets; i++)
                if (isempty(in->subnets[i].zone))
                        return -EINVAL;

        cands = calloc(in->catalog->n ? in->catalog->n : 1, sizeof(*cands));
        assigned = calloc(in->n_subnets, sizeof(*assigned));
        if (!cands || !assigned)
                return -ENOMEM;
        for (size_t i = 0; i < in->catalog->n; i++)
                if (allowed(in->req, &in->catalog->types[i]))
                        cands[n_cands++] = &in->catalog->types[i];
        qsort(cands, n_cands, sizeof(*cands), type_cmp);

        /* Bins are as large as the largest allowed type leaves after the DaemonSets: fewest instances. */
        struct room cap = { 0, 0, 0 };
        for (size_t i = 0; i < n_cands; i++) {
                struct room t = type_room(cands[i]);
                if (t.cpu > cap.cpu || (t.cpu == cap.cpu && t.mem > cap.mem))
                        cap = t;
        }
        cap.cpu -= in->daemonset.cpu_millis;
        cap.mem -= in->daemonset.memory_bytes;
        cap.pods -= in->daemonset_pods;
        if (n_cands == 0 || cap.cpu <= 0 || cap.mem <= 0 || cap.pods <= 0) {
                sel.pods_unplaceable = (unsigned)in->n_pods;
                *ret = sel;
                return 0;
        }
        r = pack(in, cap, &sel);
        if (r < 0) {
                prov_selection_clear(&sel);
                return r;
        }

        budget = in->vcpu_budget;
        for (size_t b = 0; b < sel.n_bins;) {
                struct prov_bin *bin = &sel.bins[b];
                bin->types = calloc(n_cands, sizeof(*bin->types));
                if (!bin->types) {
                        prov_selection_clear(&sel);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < n_cands; i++) {
                        struct room t = type_room(cands[i]);
                        if (t.cpu >= bin->total.cpu_millis && t.mem >= bin->total.memory_bytes &&
                            t.pods >= (int64_t)(bin->pods + in->daemonset_pods) &&
                            (budget < 0 || cands[i]->vcpu <= budget))
                                bin->types[bin->n_types++] = cands[i];
                }
                if (bin->n_types == 0) {
                        /* Only the vCPU limit can leave a packed bin without a type. */
                        sel.bins_over_budget++;
                        free(bin->pod_index);
                        free(bin->types);
                        memmove(bin, bin + 1, (sel.n_bins - b - 1) * sizeof(*bin));
                        sel.n_bins--;
                        continue;
                }
                bin->vcpu_reserved = bin->types[0]->vcpu;
                if (budget >= 0)
                        budget -= bin->vcpu_reserved;

                size_t best = SIZE_MAX;
                unsigned best_load = 0;
                for (size_t i = 0; i < in->n_subnets; i++) {
                        if (!subnet_eligible(in, i))
                                continue;
                        unsigned load = assigned[i] + (in->subnet_load ? in->subnet_load[i] : 0);
                        if (best == SIZE_MAX || load < best_load) {
                                best = i;
                                best_load = load;
                        }
                }
                bin->preferred_subnet = best;
                assigned[best]++;
                b++;
        }
        *ret = sel;
        return 0;
}

size_t prov_bin_overrides(const struct prov_select_input *in, const struct prov_bin *bin,
                          const char *capacity_type, prov_unavailable_fn unavailable, void *userdata,
                          struct prov_override *out, size_t out_size)
{
        unsigned cap = in->req->max_overrides ? in->req->max_overrides : PROV_DEFAULT_MAX_OVERRIDES;
        size_t n = 0;

        if (cap > out_size)
                cap = (unsigned)out_size;
        for (size_t t = 0; t < bin->n_types && n < cap; t++)
                for (size_t k = 0; k < in->n_subnets && n < cap; k++) {
                        /* The preferred subnet first, then the others in their configured order. */
                        size_t i = k == 0 ? bin->preferred_subnet : (k <= bin->preferred_subnet ? k - 1 : k);
                        const struct prov_subnet *s = &in->subnets[i];
                        if (!subnet_eligible(in, i))
                                continue;
                        if (unavailable &&
                            unavailable(bin->types[t]->name, s->zone, capacity_type, userdata))
                                continue;
                        out[n++] = (struct prov_override){ .type = bin->types[t], .subnet = s };
                }
        return n;
}

int prov_client_token(const char *event_id, const char *instance_id, size_t bin, const char *capacity_type,
                      unsigned attempt, char ret[65])
{
        _cleanup_free_ char *key = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;

        key = strprintf("%s\n%s\n%zu\n%s\n%u", event_id ? event_id : "", instance_id ? instance_id : "", bin,
                        capacity_type ? capacity_type : "", attempt);
        if (!key)
                return -ENOMEM;
        if (EVP_Digest(key, strlen(key), md, &md_len, EVP_sha256(), NULL) != 1 || md_len < 20)
                return -EIO;
        /* "spotdrain-" + 40 hex digits: 50 characters, within CreateFleet's 64. */
        int k = snprintf(ret, 65, "spotdrain-");
        for (unsigned i = 0; i < 20; i++)
                k += snprintf(ret + k, (size_t)(65 - k), "%02x", md[i]);
        return 0;
}
