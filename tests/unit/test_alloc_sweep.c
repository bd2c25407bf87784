/* Allocation-failure sweep over the parsers (issue 8): for n = 1, 2, 3, ... the n-th allocation of a call
 * fails, until a run completes without reaching n. Every run must return an error or succeed, never crash,
 * and once its outputs are freed, leave no allocation behind.
 *
 * malloc, calloc, realloc and free are replaced in this executable (glibc lets a program define them;
 * libc's own strdup, strndup, fopen, realpath... and libcjson, libyaml and expat call them through the
 * dynamic linker, so every allocation of a parser passes here) and forward to glibc's __libc_* functions.
 * The replacement only counts and fails while armed, around the call under test; it keeps the pointers
 * allocated while armed in a fixed table (no allocation of its own) so a run's leftovers are known.
 *
 * ASan owns malloc: under it (make unit-asan) the sweep is skipped, and so it is under valgrind (which
 * replaces malloc in the executable as well); the plain build (make unit) runs it.
 * Runs from the repository root (data files under tests/unit/data/ and examples/). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "sim/model.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/config.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#if defined(__SANITIZE_ADDRESS__)
#define SWEEP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SWEEP_ASAN 1
#endif
#endif

#ifndef SWEEP_ASAN

#include <valgrind/valgrind.h>

/* ---- the replacement allocator ---- */

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);

#define LIVE_SLOTS (1u << 17) /* open addressing, a power of two; far more than any parser here keeps */

static struct {
        bool armed;
        unsigned long count;   /* allocations attempted while armed */
        unsigned long fail_at; /* 0 = none */
        bool failed;           /* the fail_at-th allocation was refused */
        size_t n_live;
        bool overflow; /* the table was full: the leak check of this run is void (the test fails) */
        void *live[LIVE_SLOTS];
} sw;

static size_t slot_of(const void *p)
{
        uintptr_t h = (uintptr_t)p;
        h ^= h >> 17;
        h *= 0x9e3779b97f4a7c15ULL;
        return (size_t)(h >> 20) & (LIVE_SLOTS - 1);
}

static void live_add(void *p)
{
        if (sw.n_live >= LIVE_SLOTS / 2) {
                sw.overflow = true;
                return;
        }
        size_t i = slot_of(p);
        while (sw.live[i])
                i = (i + 1) & (LIVE_SLOTS - 1);
        sw.live[i] = p;
        sw.n_live++;
}

/* Removes p if it was allocated while armed (linear probing: the entries after it are put back). */
static void live_remove(const void *p)
{
        if (sw.n_live == 0)
                return;
        size_t i = slot_of(p);
        while (sw.live[i] && sw.live[i] != p)
                i = (i + 1) & (LIVE_SLOTS - 1);
        if (!sw.live[i])
                return;
        sw.live[i] = NULL;
        sw.n_live--;
        for (size_t j = (i + 1) & (LIVE_SLOTS - 1); sw.live[j]; j = (j + 1) & (LIVE_SLOTS - 1)) {
                void *q = sw.live[j];
                sw.live[j] = NULL;
                sw.n_live--;
                live_add(q);
        }
}

/* Whether this allocation is the one to refuse. */
static bool refuse(void)
{
        if (!sw.armed)
                return false;
        sw.count++;
        if (sw.fail_at && sw.count == sw.fail_at) {
                sw.failed = true;
                return true;
        }
        return false;
}

void *malloc(size_t size)
{
        if (refuse())
                return NULL;
        void *p = __libc_malloc(size);
        if (p && sw.armed)
                live_add(p);
        return p;
}

void *calloc(size_t n, size_t size)
{
        if (refuse())
                return NULL;
        void *p = __libc_calloc(n, size);
        if (p && sw.armed)
                live_add(p);
        return p;
}

void *realloc(void *old, size_t size)
{
        if (size > 0 && refuse())
                return NULL;
        void *p = __libc_realloc(old, size);
        if (sw.armed && (p || size == 0)) {
                if (old)
                        live_remove(old);
                if (p)
                        live_add(p);
        }
        return p;
}

void free(void *p)
{
        if (!p)
                return;
        if (sw.armed)
                live_remove(p);
        __libc_free(p);
}

static void arm(unsigned long fail_at)
{
        memset(sw.live, 0, sizeof(sw.live));
        sw.n_live = 0;
        sw.overflow = false;
        sw.count = 0;
        sw.fail_at = fail_at;
        sw.failed = false;
        sw.armed = true;
}

/* ---- the sweep ---- */

/* One parse of a fixed input: runs the parser, checks what it returned and frees every output. Returns
 * the parser's result. Runs armed, so it must not call cmocka's assertions (they would allocate and
 * longjmp out): it reports a broken contract by returning INT_MIN. */
typedef int (*parse_fn)(void);
#define CONTRACT_BROKEN (-1000000)

/* Stops long before a runaway: the inputs below need a few thousand allocations at most. */
#define SWEEP_MAX 200000ul

static void sweep(const char *name, parse_fn fn)
{
        /* Unarmed first: the input must parse, and one-time caches of libc (locale, time zone) fill. */
        assert_int_equal(fn(), 0);

        /* Valgrind replaces malloc in the executable too, so this one never runs under it. */
        if (RUNNING_ON_VALGRIND)
                skip();
        unsigned long n;
        for (n = 1; n < SWEEP_MAX; n++) {
                arm(n);
                int r = fn();
                sw.armed = false;
                bool failed = sw.failed;
                size_t left = sw.n_live;
                bool overflow = sw.overflow;
                if (r == CONTRACT_BROKEN)
                        fail_msg("%s: allocation %lu failed: the parser broke its contract", name, n);
                if (overflow)
                        fail_msg("%s: allocation %lu failed: too many live allocations to track", name, n);
                if (left > 0)
                        fail_msg("%s: allocation %lu failed: %zu allocation(s) leaked (result %d)", name, n,
                                 left, r);
                /* The replacement must be the allocator in use, or the sweep proves nothing. */
                if (n == 1 && sw.count == 0)
                        fail_msg("%s: no allocation went through the replacement malloc", name);
                if (!failed) {
                        /* The whole parse ran without reaching the n-th allocation: done. */
                        assert_int_equal(r, 0);
                        break;
                }
                /* An allocation failure is an error (any: some parsers report it as a parse error), or a
                 * success when the allocation was optional. */
                assert_true(r <= 0);
        }
        assert_true(n < SWEEP_MAX);
        print_message("%s: %lu allocation failures survived\n", name, n - 1);
}

/* ---- the parsers and their inputs ---- */

static const char SPOT_EVENT[] =
    "{\"version\":\"0\",\"id\":\"1e5527d7-bb36-4607-3370-4164db56a40e\",\"detail-type\":\"EC2 Spot "
    "Instance Interruption Warning\",\"source\":\"aws.ec2\",\"account\":\"123456789012\",\"time\":"
    "\"2024-05-14T10:21:53Z\",\"region\":\"us-east-1\",\"resources\":[\"arn:aws:ec2:us-east-1a:instance/"
    "i-0abcd1234ef567890\"],\"detail\":{\"instance-id\":\"i-0abcd1234ef567890\",\"instance-action\":"
    "\"terminate\"}}";

/* The same event inside an SNS envelope (a string to parse again). */
static const char SNS_EVENT[] =
    "{\"Type\":\"Notification\",\"MessageId\":\"c8a8e5d2\",\"TopicArn\":\"arn:aws:sns:us-east-1:"
    "123456789012:t\",\"Message\":\"{\\\"version\\\":\\\"0\\\",\\\"id\\\":\\\"1e55\\\",\\\"detail-type\\\":"
    "\\\"EC2 Instance Rebalance Recommendation\\\",\\\"source\\\":\\\"aws.ec2\\\",\\\"time\\\":"
    "\\\"2024-05-14T10:21:53Z\\\",\\\"region\\\":\\\"us-east-1\\\",\\\"resources\\\":[\\\"arn:aws:ec2:"
    "us-east-1a:instance/i-0abcd1234ef567890\\\"],\\\"detail\\\":{\\\"instance-id\\\":"
    "\\\"i-0abcd1234ef567890\\\"}}\",\"Timestamp\":\"2024-05-14T10:21:54.000Z\"}";

static int notice_one(const char *body)
{
        struct notice *v = NULL;
        size_t n = 0;
        char reason[256];
        const struct notice_parse_opts opts = { .now_usec = 1715682115000000ULL };
        int r = notice_parse(body, strlen(body), &opts, &v, &n, reason, sizeof(reason));
        if (r < 0)
                return v ? CONTRACT_BROKEN : r;
        if (n != 1 || !v)
                return CONTRACT_BROKEN;
        free(v);
        return 0;
}

static int parse_notice(void)
{
        int r = notice_one(SPOT_EVENT);
        return r < 0 ? r : notice_one(SNS_EVENT);
}

static const char YAML_DOC[] = "# flow and block styles, quoting, multi-line scalars (aliases are refused)\n"
                               "base: {a: 1, b: [x, y, \"z\"]}\n"
                               "derived:\n"
                               "  c: |\n"
                               "    line one\n"
                               "    line two\n"
                               "  d: 'single'\n"
                               "list:\n"
                               "  - {name: n1, labels: {zone: a}}\n"
                               "  - name: n2\n"
                               "    taints: [{key: k, effect: NoSchedule}]\n"
                               "empty: ~\n";

static int parse_yaml(void)
{
        struct ynode *root = NULL;
        char *err = NULL;
        int r = yaml_load_string(YAML_DOC, strlen(YAML_DOC), "sweep.yaml", &root, &err);
        free(err);
        if (r < 0)
                return root ? CONTRACT_BROKEN : r;
        ynode_free(root);
        return 0;
}

static int parse_config(void)
{
        struct spotdrain_config *c = NULL;
        int r = config_new(&c);
        if (r < 0)
                return c ? CONTRACT_BROKEN : r;
        char *err = NULL;
        r = config_load_file(c, "tests/unit/data/config/full.yaml", &err);
        free(err);
        config_free(c);
        return r;
}

static int kubeconfig_one(const char *path, const char *context)
{
        struct kube_config *c = NULL;
        char *err = NULL;
        int r = kube_config_load_file(path, context, &c, &err);
        free(err);
        if (r < 0)
                return c ? CONTRACT_BROKEN : r;
        kube_config_free(c);
        return 0;
}

static int parse_kubeconfig(void)
{
        int r = kubeconfig_one("tests/unit/data/kubeconfig/basic.yaml", NULL);
        return r < 0 ? r : kubeconfig_one("tests/unit/data/kubeconfig/exec-v1.yaml", NULL);
}

static const char POD_JSON[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-0\",\"namespace\":\"default\","
    "\"uid\":\"1b2c\",\"creationTimestamp\":\"2024-05-14T10:00:00Z\",\"labels\":{\"app\":\"web\",\"tier\":"
    "\"front\"},\"annotations\":{\"kubernetes.io/config.mirror\":\"x\",\"b\":\"c\"},\"ownerReferences\":"
    "[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-7d\",\"controller\":true}]},"
    "\"spec\":{\"nodeName\":\"n1\",\"priority\":1000,\"priorityClassName\":\"high\","
    "\"terminationGracePeriodSeconds\":45,\"volumes\":[{\"name\":\"tmp\",\"emptyDir\":{}}]},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
    "\"lastTransitionTime\":\"2024-05-14T10:00:05Z\"}]}}";

static const char PDB_JSON[] =
    "{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"web\","
    "\"namespace\":\"default\",\"generation\":3},\"spec\":{\"minAvailable\":\"50%\",\"selector\":"
    "{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\","
    "\"values\":[\"front\",\"back\"]},{\"key\":\"env\",\"operator\":\"DoesNotExist\"}]},"
    "\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\"},\"status\":{\"observedGeneration\":3,"
    "\"currentHealthy\":3,\"desiredHealthy\":2,\"expectedPods\":4,\"disruptionsAllowed\":1}}";

static int parse_kube_objects(void)
{
        cJSON *pj = cJSON_Parse(POD_JSON);
        cJSON *bj = cJSON_Parse(PDB_JSON);
        int r = -ENOMEM;
        if (pj && bj) {
                struct kube_pod pod;
                struct kube_pdb pdb;
                memset(&pod, 0, sizeof(pod));
                memset(&pdb, 0, sizeof(pdb));
                r = kube_pod_parse(pj, &pod);
                if (r == 0) {
                        r = kube_pdb_parse(bj, &pdb);
                        if (r == 0) {
                                if (!kube_pdb_matches_pod(&pdb, &pod))
                                        r = CONTRACT_BROKEN;
                                kube_pdb_clear(&pdb);
                        }
                        kube_pod_clear(&pod);
                }
        }
        cJSON_Delete(pj);
        cJSON_Delete(bj);
        return r;
}

static const char XML_DOC[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\n"
    "  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>\n"
    "  <reservationSet><item><instancesSet>\n"
    "    <item><instanceId>i-0abcd1234ef567890</instanceId><instanceType>m5.large</instanceType>\n"
    "      <instanceState><code>16</code><name>running</name></instanceState>\n"
    "      <tagSet><item><key>Name</key><value>a &amp; b &lt;c&gt; &#x41;</value></item></tagSet>\n"
    "    </item>\n"
    "  </instancesSet></item></reservationSet>\n"
    "</DescribeInstancesResponse>\n";

static const char XML_ERROR[] =
    "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
    "<Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>"
    "<Message>No OpenIDConnect provider found</Message></Error>"
    "<RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ErrorResponse>";

static int parse_awsxml(void)
{
        struct awsxml *x = NULL;
        char *err = NULL;
        int r = awsxml_parse(XML_DOC, strlen(XML_DOC), &x, &err);
        free(err);
        if (r < 0)
                return x ? CONTRACT_BROKEN : r;
        awsxml_free(x);
        struct aws_error e;
        memset(&e, 0, sizeof(e));
        r = aws_error_parse(XML_ERROR, strlen(XML_ERROR), &e);
        if (r < 0)
                return r;
        aws_error_clear(&e);
        return 0;
}

static const char STS_ANSWER[] =
    "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
    "<AssumeRoleWithWebIdentityResult><Credentials><AccessKeyId>ASIAEXAMPLEIRSA12345</AccessKeyId>"
    "<SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>"
    "<SessionToken>IQoJb3JpZ2luX2VjEXAMPLE==</SessionToken><Expiration>2024-05-14T11:21:53Z</Expiration>"
    "</Credentials></AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>ad4156e9</RequestId>"
    "</ResponseMetadata></AssumeRoleWithWebIdentityResponse>";

static const char CREDS_JSON[] = "{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":"
                                 "\"ASIAIOSFODNN7EXAMPLE\",\"SecretAccessKey\":\"wJalrXUtnFEMI/K7MDENG\","
                                 "\"Token\":\"IQoJb3JpZ2luX2Vj==\",\"Expiration\":\"2024-05-14T16:14:39Z\"}";

/* The readers on top of awsxml: STS, the credential JSON, and an EC2 answer. */
static int parse_aws_answers(void)
{
        struct aws_credentials c;
        char *msg = NULL;
        memset(&c, 0, sizeof(c));
        int r = aws_sts_parse_web_identity(200, STS_ANSWER, strlen(STS_ANSWER), &c, &msg);
        free(msg);
        if (r < 0)
                return r;
        aws_credentials_clear(&c);
        msg = NULL;
        r = aws_creds_parse_json(CREDS_JSON, "imds", &c, &msg);
        free(msg);
        if (r < 0)
                return r;
        aws_credentials_clear(&c);
        struct ec2_result res;
        struct ec2_instance *v = NULL;
        size_t n = 0;
        memset(&res, 0, sizeof(res));
        r = ec2_parse_describe_instances(200, XML_DOC, strlen(XML_DOC), &res, &v, &n);
        if (r < 0)
                return r;
        if (n != 1)
                r = CONTRACT_BROKEN;
        free(v);
        return r;
}

static int parse_scenario(void)
{
        struct ynode *tree = NULL;
        char *err = NULL;
        int r = sim_scenario_load("examples/drain-8.yaml", &tree, &err);
        free(err);
        if (r < 0)
                return tree ? CONTRACT_BROKEN : r;
        ynode_free(tree);
        return 0;
}

static void test_notice(void **state)
{
        sweep("notice_parse", parse_notice);
}
static void test_yaml(void **state)
{
        sweep("yaml_load_string", parse_yaml);
}
static void test_config(void **state)
{
        sweep("config_load_file", parse_config);
}
static void test_kubeconfig(void **state)
{
        sweep("kube_config_load_file", parse_kubeconfig);
}
static void test_kube_objects(void **state)
{
        sweep("kube_pod_parse/kube_pdb_parse", parse_kube_objects);
}
static void test_awsxml(void **state)
{
        sweep("awsxml_parse/aws_error_parse", parse_awsxml);
}
static void test_aws_answers(void **state)
{
        sweep("aws_sts_parse_web_identity/aws_creds_parse_json/ec2_parse_describe_instances",
              parse_aws_answers);
}
static void test_scenario(void **state)
{
        sweep("sim_scenario_load", parse_scenario);
}

#else /* SWEEP_ASAN */

static void skip_under_asan(void **state)
{
        skip(); /* ASan replaces malloc; the plain build (make unit) runs the sweep */
}
#define test_notice       skip_under_asan
#define test_yaml         skip_under_asan
#define test_config       skip_under_asan
#define test_kubeconfig   skip_under_asan
#define test_kube_objects skip_under_asan
#define test_awsxml       skip_under_asan
#define test_aws_answers  skip_under_asan
#define test_scenario     skip_under_asan

#endif

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_notice),       cmocka_unit_test(test_yaml),
                cmocka_unit_test(test_config),       cmocka_unit_test(test_kubeconfig),
                cmocka_unit_test(test_kube_objects), cmocka_unit_test(test_awsxml),
                cmocka_unit_test(test_aws_answers),  cmocka_unit_test(test_scenario),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
