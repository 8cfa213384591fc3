/* pp_opt.h — command-line options as a table, for both programs (pptune's subcommands, pprun):
 * one row per option (its name, its value's kind, the field it fills, its range or choices, its
 * help text), read with getopt_long (`--opt value` and `--opt=value`) and described by
 * pp_opt_help, so --help is the rows and stays true.
 *
 * A parse walks the words in order: pp_opt_next applies each option to its row's field, or
 * returns the row's code for the caller to handle (kind PP_OPT_CODE, or any row with a code:
 * applied first, then returned); the first bad word stops it with what went wrong in the
 * parser (unknown, missing value, bad value and what it must be), which each program words its
 * own way. Words that are not options are moved after them (getopt's permutation) and left at
 * argv[optind..]. Library code: prints nothing but the help asked for, keeps no state between
 * parses (getopt's globals are reset by pp_opt_init).
 */
#ifndef PP_OPT_H
#define PP_OPT_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PP_OPT_CODE = 0, /* the caller's: pp_opt_next returns `code` (its value in p->arg) */
    PP_OPT_FLAG,     /* no value: the int field is set to 1 */
    PP_OPT_CLEAR,    /* no value: the int field is set to 0 (--no-...) */
    PP_OPT_INT,      /* int field, an integer in [min, max] */
    PP_OPT_DOUBLE,   /* double field, a finite number in [min, max] */
    PP_OPT_U64,      /* uint64_t field, a non-negative integer (0x.. and 0.. as strtoull) */
    PP_OPT_STRING,   /* const char * field: the value itself (a pointer into argv) */
    PP_OPT_CHOICE,   /* int field: the index of the value among choices */
    PP_OPT_NAME,     /* const char * field: the value, one of choices (the static string) */
    PP_OPT_SECTION,  /* not an option: a heading line of --help (help), and the column the
                        rows after it use (width, 0: as before) */
} pp_opt_kind;

typedef struct pp_opt {
    const char *name; /* long name without "--"; NULL for a SECTION */
    char letter;      /* short form (-p), 0: none */
    pp_opt_kind kind;
    size_t offset;    /* of the field in the group's target */
    double min, max;  /* INT, DOUBLE: the range; max 0: the type's own limit */
    const char *const *choices; /* CHOICE, NAME: the values, NULL-terminated */
    int code;         /* returned by pp_opt_next after the row is applied; 0: none (a CODE row
                         must have one) */
    int has_arg;      /* CODE: required_argument, optional_argument or no_argument */
    const char *arg;  /* the value's name in --help ("N"); NULL: none */
    const char *help; /* --help text, '\n' between its lines; NULL: not listed */
    int show_default; /* 1: --help adds " (default X)", X the defaults' field */
    int width;        /* SECTION: the help column of the rows after it */
} pp_opt;

/* Rows filling one struct. */
typedef struct {
    const pp_opt *opts;
    int n;
    void *target; /* the struct the rows' offsets point into */
} pp_opt_group;

#define PP_OPT_MAX 96    /* options of one parse, all groups */
#define PP_OPT_GROUPS 4

typedef enum {
    PP_OPT_ERR_NONE = 0,
    PP_OPT_ERR_UNKNOWN, /* not an option of the table (name: the word) */
    PP_OPT_ERR_MISSING, /* needs a value (name: the option, without any "=...") */
    PP_OPT_ERR_VALUE,   /* a value it does not take (arg, and want: what it must be) */
} pp_opt_error;

typedef struct {
    pp_opt_group groups[PP_OPT_GROUPS];
    int n_groups;
    int argc;
    char **argv;
    long int_max; /* INT rows without max: at most this (default INT_MAX) */
    struct option longopts[PP_OPT_MAX + 1];
    const pp_opt *rows[PP_OPT_MAX];       /* longopts[i]'s row */
    const pp_opt_group *row_group[PP_OPT_MAX];
    int n_long;
    char optstring[2 * PP_OPT_MAX + 2];
    /* the option just read */
    const pp_opt *opt; /* its row (NULL: none) */
    char name[64];     /* as written: "--ranks", "-p" */
    const char *arg;   /* its value; NULL when it takes none */
    pp_opt_error error;
    char want[128]; /* PP_OPT_ERR_VALUE: "an integer >= 1", "one of cpu, cuda" */
} pp_opt_parser;

/* Starts a parse of argv[1..argc) over the groups (copied; their rows must outlive the
 * parse). More than PP_OPT_MAX options is a programming error: the rest are not read. */
void pp_opt_init(pp_opt_parser *p, const pp_opt_group *groups, int n_groups, int argc,
                 char **argv);
/* Reads the next option: 0 when it was applied to its field (go on), the row's code when it
 * has one, -1 when no option is left (the other words are at argv[optind..argc)), or
 * PP_OPT_BAD with p->error, p->name, p->arg and p->want saying what went wrong. */
#define PP_OPT_BAD (-2)
int pp_opt_next(pp_opt_parser *p);

/* The values' checks, for a caller's own options (the strings say what they must be in the
 * words pp_opt_next uses): 1 and *out on success, else 0. INT: [min, max]; DOUBLE: finite and
 * [min, max] (max 0: none). */
int pp_opt_int(const char *s, long min, long max, int *out);
int pp_opt_double(const char *s, double min, double max, double *out);
/* What a row's value must be: "an integer >= 1", "a finite number >= 0", "one of a, b or c"
 * (a CHOICE, NAME: "a or b"), into buf; returns buf. */
char *pp_opt_want(const pp_opt *o, char *buf, size_t n);

/* --help lines of the rows: "  --name ARG" (and "-l"), padded to the column (24 unless a
 * SECTION says), then the help's lines; a label past the column puts the help on the next line.
 * defaults (may be NULL): a struct of the group's type holding the defaults, for rows with
 * show_default. */
void pp_opt_help(FILE *fp, const pp_opt *opts, int n, const void *defaults);

#ifdef __cplusplus
}
#endif
#endif
