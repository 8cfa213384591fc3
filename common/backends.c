/* backends.c — the table of backend rows (pp_backends.h): the rows of the backends' folders
 * (runtime/<folder>/row_<id>.c), in the order of the generated list pp_backend_list.h. Not
 * here: the rows themselves, the backends (runtime/cpu/, runtime/cuda/) and their creation
 * (runtime/backend_device.c). */
#include <string.h>

#include "pp_backends.h"

#define PP_BACKEND(ID, id) extern const pp_backend_row pp_backend_row_##id;
#include "pp_backend_list.h"
#undef PP_BACKEND

static const pp_backend_row *const rows[PP_RT_BACKEND__COUNT] = {
#define PP_BACKEND(ID, id) [PP_RT_BACKEND_##ID] = &pp_backend_row_##id,
#include "pp_backend_list.h"
#undef PP_BACKEND
};

const pp_backend_row *pp_backend_row_of(int kind)
{
    return kind >= 0 && kind < PP_RT_BACKEND__COUNT ? rows[kind] : NULL;
}

int pp_backend_kind(const pp_backend_row *r)
{
    for (int k = 0; r && k < PP_RT_BACKEND__COUNT; k++)
        if (rows[k] == r)
            return k;
    return -1;
}

const pp_backend_row *pp_backend_row_named(const char *name)
{
    for (int k = 0; name && k < PP_RT_BACKEND__COUNT; k++)
        if (!strcmp(rows[k]->name, name))
            return rows[k];
    return NULL;
}

const pp_backend_row *pp_backend_row_for_device(const char *device_kind)
{
    for (int k = 0; device_kind && k < PP_RT_BACKEND__COUNT; k++)
        if (rows[k]->choice && !strcmp(rows[k]->device_kind, device_kind))
            return rows[k];
    return NULL;
}

const pp_backend_row *pp_backend_row_default(void)
{
    for (int k = 0; k < PP_RT_BACKEND__COUNT; k++)
        if (rows[k]->pprun_default)
            return rows[k];
    return rows[PP_RT_BACKEND_CPU]; /* not reached: a test holds one row to it */
}

const char *const *pp_backend_choices(void)
{
    static const char *names[PP_RT_BACKEND__COUNT + 1];
    if (!names[0]) { /* the rows never change: filled once, the same every time */
        int n = 0;
        for (int k = 0; k < PP_RT_BACKEND__COUNT; k++)
            if (rows[k]->choice)
                names[n++] = rows[k]->name;
    }
    return names;
}

int pp_backend_row_has_precision(const pp_backend_row *r, int precision)
{
    return r && precision >= 0 && precision < 32 && (r->precisions & (1u << precision));
}

const char *pp_backend_row_flag(const pp_backend_row *r)
{
    return r && !r->pprun_default ? r->name : NULL;
}
