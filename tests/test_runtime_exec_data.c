/* test_runtime_exec_data.c — the training data streams: windows of a text file's bytes with
 * targets shifted by one, reproducible from the seed; the synthetic stream's range, determinism
 * and learnable structure; errors naming the file and the sizes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"

#include "pp_test_ok.h"

#define PROSE PP_FIXTURES_DIR "/text/prose.txt"

static int contains(const char *hay, size_t n, const char *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0)
            return 1;
    return 0;
}

Test(runtime_data, text_windows_are_slices_of_the_file)
{
    char *text;
    size_t len;
    OK(pp_file_read(PROSE, &text, &len));
    pp_rt_data *d;
    OK(pp_rt_data_open_text(PROSE, 11, &d));
    cr_assert_eq(pp_rt_data_vocab(d), 256);
    enum { ROWS = 16, T = 24 };
    int32_t rows[ROWS][T + 1];
    OK(pp_rt_data_next(d, ROWS, T, &rows[0][0]));
    int distinct = 0;
    for (int r = 0; r < ROWS; r++) {
        char s[T + 2];
        for (int i = 0; i <= T; i++) {
            cr_assert(rows[r][i] >= 0 && rows[r][i] < 256);
            s[i] = (char)rows[r][i];
        }
        s[T + 1] = '\0';
        cr_assert(contains(text, len, s, T + 1), "row %d \"%s\" is not in the file", r, s);
        distinct += r > 0 && memcmp(rows[r], rows[0], sizeof rows[0]) != 0;
    }
    cr_assert_gt(distinct, ROWS / 2, "windows should start at different offsets");
    /* the same seed gives the same windows, another seed others */
    pp_rt_data *same, *other;
    OK(pp_rt_data_open_text(PROSE, 11, &same));
    OK(pp_rt_data_open_text(PROSE, 12, &other));
    int32_t a[ROWS][T + 1], b[ROWS][T + 1];
    OK(pp_rt_data_next(same, ROWS, T, &a[0][0]));
    OK(pp_rt_data_next(other, ROWS, T, &b[0][0]));
    cr_assert(!memcmp(a, rows, sizeof a));
    cr_assert(memcmp(b, rows, sizeof b) != 0);
    pp_rt_data_destroy(d);
    pp_rt_data_destroy(same);
    pp_rt_data_destroy(other);
    free(text);
}

Test(runtime_data, errors_name_the_file_and_sizes)
{
    pp_rt_data *d;
    cr_assert_eq(pp_rt_data_open_text("/nonexistent/x.txt", 1, &d), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), "cannot read the data file /nonexistent/x.txt"), "%s",
              pp_err_text());
    OK(pp_rt_data_open_text(PROSE, 1, &d));
    int32_t *big = calloc(8000, sizeof *big);
    cr_assert_eq(pp_rt_data_next(d, 1, 5000, big), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "fewer than one window of T+1 = 5001 tokens"), "%s",
              pp_err_text());
    free(big);
    pp_rt_data_destroy(d);
    cr_assert_eq(pp_rt_data_synthetic(1, 1, &d), PP_ERR_INVALID);
}

Test(runtime_data, synthetic_stream_is_deterministic_and_learnable)
{
    enum { V = 50, ROWS = 64, T = 63 };
    pp_rt_data *d, *e;
    OK(pp_rt_data_synthetic(V, 5, &d));
    OK(pp_rt_data_synthetic(V, 5, &e));
    static int32_t a[ROWS][T + 1], b[ROWS][T + 1];
    OK(pp_rt_data_next(d, ROWS, T, &a[0][0]));
    OK(pp_rt_data_next(e, ROWS, T, &b[0][0]));
    cr_assert(!memcmp(a, b, sizeof a));
    /* a bigram table: the most frequent successor of each token should cover about 3/4 of
     * the transitions (uniform tokens would give about 1/V each) */
    static int count[V][V];
    int total = 0;
    for (int r = 0; r < ROWS; r++)
        for (int i = 0; i < T; i++) {
            cr_assert(a[r][i] >= 0 && a[r][i] < V);
            count[a[r][i]][a[r][i + 1]]++;
            total++;
        }
    int top = 0;
    for (int x = 0; x < V; x++) {
        int best = 0;
        for (int y = 0; y < V; y++)
            best = count[x][y] > best ? count[x][y] : best;
        top += best;
    }
    cr_assert_gt((double)top / total, 0.6, "top successor share %g", (double)top / total);
    pp_rt_data_destroy(d);
    pp_rt_data_destroy(e);
}
