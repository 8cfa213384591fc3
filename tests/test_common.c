/* test_common.c — the error trail, atomic files, FNV-1a and host grouping every module uses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_common.h"

static pp_status inner(void) { return PP_ERR(PP_ERR_PARSE, "model.json: \"num_layers\" must be positive, got %d", -3); }
static pp_status outer(void)
{
    PP_TRY(inner());
    return PP_OK;
}

Test(common, error_message_keeps_text_and_trail)
{
    cr_assert_eq(outer(), PP_ERR_PARSE);
    cr_assert_str_eq(pp_err_text(), "model.json: \"num_layers\" must be positive, got -3");
    cr_assert(strstr(pp_err_msg(), "test_common.c:") != NULL, "trail missing: %s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), " < ") != NULL, "no propagation step in: %s", pp_err_msg());
    pp_err_clear();
    cr_assert_str_eq(pp_err_msg(), "");
}

Test(common, atomic_write_replaces_whole_file)
{
    char dir[] = "/tmp/pp_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/out.json", dir);
    cr_assert_eq(pp_file_write_atomic(path, "old", 3), PP_OK);
    pp_afile af;
    cr_assert_eq(pp_afile_open(&af, path), PP_OK);
    fputs("new content", af.fp);
    /* until commit the old file is intact */
    char *data;
    size_t n;
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "old");
    free(data);
    cr_assert_eq(pp_afile_commit(&af), PP_OK);
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "new content");
    cr_assert_eq(n, 11);
    free(data);
    /* abort leaves the committed file and no temporary behind */
    cr_assert_eq(pp_afile_open(&af, path), PP_OK);
    fputs("partial", af.fp);
    pp_afile_abort(&af);
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "new content");
    free(data);
    remove(path);
    cr_assert_eq(rmdir(dir), 0, "directory not empty: a temporary file was left behind");
}

Test(common, atomic_write_into_missing_directory_fails_clearly)
{
    pp_status st = pp_file_write_atomic("/nonexistent-dir/x.json", "x", 1);
    cr_assert_eq(st, PP_ERR_IO);
    cr_assert(strstr(pp_err_text(), "/nonexistent-dir/x.json") != NULL, "%s", pp_err_text());
}

Test(common, read_missing_file_names_it)
{
    char *d;
    cr_assert_eq(pp_file_read("/nonexistent.txt", &d, NULL), PP_ERR_IO);
    cr_assert(strstr(pp_err_text(), "/nonexistent.txt") != NULL);
}

/* Published FNV-1a 64 test vectors (Fowler, Noll, Vo): the cluster fingerprint and the
 * checkpoint hashes depend on these exact values. */
Test(common, fnv1a_matches_published_vectors)
{
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, ""), 0xcbf29ce484222325ull);
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, "a"), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, "foobar"), 0x85944171f73967e8ull);
    uint64_t h = pp_fnv1a(PP_FNV1A_BASIS, "foo", 3);
    cr_assert_eq(pp_fnv1a(h, "bar", 3), 0x85944171f73967e8ull, "piecewise equals whole");
}

/* Host names as MPI_Allgather leaves them: nodes numbered in order of first appearance, each
 * rank's host-local rank counting the lower ranks on its host. */
Test(common, launch_hosts_groups_ranks_by_host)
{
    char hosts[5][8] = {"b", "a", "b", "c", "a"};
    int node[5], local[5];
    cr_assert_eq(pp_launch_hosts(&hosts[0][0], sizeof hosts[0], 5, node, local), 3);
    const int want_node[5] = {0, 1, 0, 2, 1}, want_local[5] = {0, 0, 1, 0, 1};
    for (int r = 0; r < 5; r++) {
        cr_expect_eq(node[r], want_node[r], "rank %d node %d", r, node[r]);
        cr_expect_eq(local[r], want_local[r], "rank %d local %d", r, local[r]);
    }
    cr_assert_eq(pp_launch_hosts(&hosts[0][0], sizeof hosts[0], 5, NULL, local), 3);
    cr_expect_eq(local[4], 1);
}
