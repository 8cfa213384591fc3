/* config_json.c — a configuration as a profile's "config" object, both ways, from the axis table
 * (config.c): the writer emits every row's key in table order, the reader checks every row's
 * type, range and rule, naming the file, the field and what was expected. One schema for the
 * tuner that writes profiles and every program that reads them. Not here: the rest of a
 * profile (profile_read.c, tuner/profile_write.c). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "pp_config.h"
#include "pp_json.h"
#include "pp_sched.h"

#define INT_MAX_FIELD 1000000000 /* no size or count in a profile comes near */

static const char *const SPLITS[] = {"even", "uneven", "first-last", NULL};

static int split_ends(const pp_config *c)
{
    return c->first_layers || c->last_layers;
}

static json_t *axis_json(const pp_config *c, const pp_config_axis *a)
{
    int v = pp_config_get(c, a);
    switch (a->kind) {
    case PP_CONFIG_SCHEDULE: return json_string(c->schedule ? c->schedule : "");
    case PP_CONFIG_INT:
    case PP_CONFIG_SPLIT_LAYERS: return json_integer(v);
    case PP_CONFIG_BOOL: return json_boolean(v);
    case PP_CONFIG_ENUM: return json_string(pp_config_enum_name(a, v));
    case PP_CONFIG_SPLIT: return json_string(split_ends(c) ? "first-last" : SPLITS[v ? 1 : 0]);
    }
    return NULL;
}

json_t *pp_config_to_json(const pp_config *c)
{
    int n;
    const pp_config_axis *axes = pp_config_axes(&n);
    json_t *o = json_object();
    for (int i = 0; o && i < n; i++) {
        if (axes[i].kind == PP_CONFIG_SPLIT_LAYERS && !split_ends(c))
            continue; /* the counts only with split "first-last" */
        json_t *v = axis_json(c, &axes[i]);
        if (!v || json_object_set_new(o, axes[i].key, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* "schedule": a name in the schedules' registry; *out is its row's name (static storage). */
static pp_status read_schedule(const pp_json_src *r, const json_t *o, const char *path,
                               pp_config *c)
{
    json_t *v = json_object_get(o, "schedule");
    const pp_sched_desc *d = json_is_string(v) ? pp_sched_lookup(json_string_value(v)) : NULL;
    if (d) {
        c->schedule = d->name;
        return PP_OK;
    }
    char names[256], want[300], field[160];
    snprintf(want, sizeof want, "one of %s",
             pp_sched_names(PP_SCHED_MEGATRON_NONE, ", ", names, sizeof names));
    return pp_json_bad(r, pp_json_path(field, sizeof field, path, "schedule"), want, v);
}

/* "one of none, selective, full" */
static const char *enum_want(const pp_config_axis *a, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "one of ");
    for (int k = 0; a->names[k] && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", k ? ", " : "", a->names[k]);
    return buf;
}

static pp_status read_axis(const pp_json_src *r, const json_t *o, const char *path,
                           const pp_config_axis *a, int *first_last, pp_config *c)
{
    const char *s;
    char want[160];
    int v = 0;
    switch (a->kind) {
    case PP_CONFIG_SCHEDULE: return read_schedule(r, o, path, c);
    case PP_CONFIG_INT:
        PP_TRY(pp_json_int(r, o, path, a->key, a->min, INT_MAX_FIELD, NULL, &v));
        break;
    case PP_CONFIG_SPLIT_LAYERS: /* the counts; 0: as the other stages */
        v = 0;
        if (*first_last)
            PP_TRY(pp_json_int(r, o, path, a->key, 0, INT_MAX_FIELD, NULL, &v));
        break;
    case PP_CONFIG_BOOL: PP_TRY(pp_json_bool(r, o, path, a->key, &v)); break;
    case PP_CONFIG_ENUM:
        PP_TRY(pp_json_enum(r, o, path, a->key, a->names, enum_want(a, want, sizeof want), &s));
        while (strcmp(a->names[v], s))
            v++;
        break;
    case PP_CONFIG_SPLIT:
        PP_TRY(pp_json_enum(r, o, path, a->key, SPLITS, "\"even\", \"uneven\" or \"first-last\"",
                            &s));
        v = !strcmp(s, "uneven");
        *first_last = !strcmp(s, "first-last");
        break;
    }
    pp_config_set(c, a, v);
    return PP_OK;
}

pp_status pp_config_from_json(const json_t *o, const char *file, const char *path, pp_config *c)
{
    pp_json_src r = {.file = file};
    int n, first_last = 0;
    const pp_config_axis *axes = pp_config_axes(&n);
    for (int i = 0; i < n; i++) {
        if (axes[i].optional_minor && !json_object_get(o, axes[i].key))
            continue; /* an older profile: the caller's default */
        PP_TRY(read_axis(&r, o, path, &axes[i], &first_last, c));
    }
    /* a 1.2 profile's "distributed_optimizer" (no "shard"): true is the optimizer's sharding */
    json_t *legacy = json_object_get(o, "distributed_optimizer");
    if (legacy && !json_object_get(o, "shard")) {
        int v = 0;
        PP_TRY(pp_json_bool(&r, o, path, "distributed_optimizer", &v));
        c->shard = v ? PP_SHARD_OPTIMIZER : PP_SHARD_NONE;
    }
    /* the rules once every field is read (a rule may look at another field) */
    for (int i = 0; i < n; i++) {
        const char *want = axes[i].rule ? axes[i].rule(c) : NULL;
        char field[160];
        if (want)
            return pp_json_bad(&r, pp_json_path(field, sizeof field, path, axes[i].key), want,
                               json_object_get(o, axes[i].key));
    }
    return PP_OK;
}
