/* libFuzzer target for the AWS answer readers: the XML reader (src/aws/xml.c: awsxml_parse, the tree
 * walkers, aws_error_parse), the STS AssumeRoleWithWebIdentity and credential-JSON readers
 * (src/aws/sts.c, credentials.c), and the EC2 / Auto Scaling answer readers (src/provision/ec2.c,
 * asg_capacity.c). Every reader gets every input, once as a 200 answer and once as a 400.
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_aws_xml/ + ../shared/fixtures)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awscreds.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/provision.h"
#include "spotdrain/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Visits every node (depth bounded by AWSXML_MAX_DEPTH, so recursion is safe). */
static size_t walk(const struct awsxml_node *n, unsigned depth)
{
        size_t count = 0;
        if (depth > AWSXML_MAX_DEPTH + 1)
                abort();
        AWSXML_FOREACH(c, n, NULL)
        {
                if (!awsxml_name(c) || !awsxml_text(c))
                        abort();
                count += 1 + walk(c, depth + 1);
        }
        return count;
}

static void xml(const char *s, size_t size)
{
        struct awsxml *x = NULL;
        char *err = NULL;
        int r = awsxml_parse(s, size, &x, &err);
        if (r < 0) {
                if (x)
                        abort();
                free(err);
                return;
        }
        free(err);
        const struct awsxml_node *root = awsxml_root(x);
        (void)walk(root, 0);
        (void)awsxml_find_text(root, "AssumeRoleWithWebIdentityResult/Credentials/AccessKeyId");
        (void)awsxml_descendant(root, "Error");
        (void)awsxml_next(awsxml_child(root, "item"), "item");
        awsxml_free(x);

        struct aws_error e;
        memset(&e, 0, sizeof(e));
        if (aws_error_parse(s, size, &e) == 0) {
                if (!e.code)
                        abort();
                aws_error_clear(&e);
        }
}

static void answers(const char *s, size_t size, long status)
{
        struct aws_credentials c;
        memset(&c, 0, sizeof(c));
        char *msg = NULL;
        if (aws_sts_parse_web_identity(status, s, size, &c, &msg) == 0)
                aws_credentials_clear(&c);
        free(msg);

        struct ec2_fleet_result f;
        memset(&f, 0, sizeof(f));
        (void)ec2_parse_create_fleet(status, s, size, &f);
        ec2_fleet_result_clear(&f);

        struct ec2_result res;
        memset(&res, 0, sizeof(res));
        struct ec2_instance *v = NULL;
        size_t n = 0;
        if (ec2_parse_describe_instances(status, s, size, &res, &v, &n) == 0)
                free(v);

        struct prov_catalog *cat = calloc(1, sizeof(*cat));
        if (cat) {
                char *next = NULL;
                memset(&res, 0, sizeof(res));
                if (ec2_parse_instance_types(status, s, size, &res, cat, &next) == 0)
                        free(next);
                prov_catalog_free(cat);
        }

        struct asg_group g;
        memset(&res, 0, sizeof(res));
        (void)asg_parse_group(status, s, size, "i-0abcd1234ef567890", &res, &g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* A NUL-terminated copy: the JSON reader takes a C string, the others a length. */
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = 0;
        xml(s, size);
        answers(s, size, 200);
        answers(s, size, 400);

        struct aws_credentials c;
        memset(&c, 0, sizeof(c));
        char *msg = NULL;
        if (aws_creds_parse_json(s, "imds", &c, &msg) == 0)
                aws_credentials_clear(&c);
        free(msg);
        free(s);
        return 0;
}
