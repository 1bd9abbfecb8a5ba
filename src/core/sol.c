/*
 * sol - speed-of-light arithmetic (sol.h): the figures a calibration measured, in the two
 * JSON forms they travel in, and the floor
 *   T_sol = max(bytes / BW, flops / peak(unit), launch floor).
 * Pure functions; the measuring is worker/calibrate.c.
 */
#include "core/sol.h"

#include <math.h>
#include <string.h>

double kevo_sol_positive(double v)
{
    return v > 0.0 && isfinite(v) ? v : 0.0;
}

int kevo_sol_set_positive(json_t *o, const char *key, double v)
{
    if (!(v > 0.0))
        return 0;
    return json_object_set_new(o, key, json_real(v));
}

/* A figure from either form: a plain number, or an object holding `key`. */
static double figure(json_t *v, const char *key)
{
    if (json_is_object(v))
        v = json_object_get(v, key);
    return json_is_number(v) ? kevo_sol_positive(json_number_value(v)) : 0.0;
}

void kevo_sol_figures_from_json(json_t *calib, struct kevo_sol_figures *out)
{
    json_t *peaks;

    memset(out, 0, sizeof *out);
    if (!json_is_object(calib))
        return;
    /* Request form: "bw"; calibration form: bandwidth.best_bytes_per_s. */
    out->bw_bytes_per_s = figure(json_object_get(calib, "bw"), "best_bytes_per_s");
    if (out->bw_bytes_per_s == 0.0)
        out->bw_bytes_per_s = figure(json_object_get(calib, "bandwidth"), "best_bytes_per_s");
    peaks = json_object_get(calib, "peaks");
    for (int u = 0; u < KEVO_UNIT_COUNT; u++)
        out->peak_flops[u] = figure(json_object_get(peaks, kevo_unit_name((enum kevo_unit)u)), "used_flops_per_s");
    out->launch_floor_s = figure(json_object_get(calib, "launch_floor_s"), "");
    out->launch_gap_s = figure(json_object_get(calib, "launch_gap_s"), "");
    /* Request form: "margin"; calibration form: "implausible_margin". */
    out->margin = figure(json_object_get(calib, "margin"), "");
    if (out->margin == 0.0)
        out->margin = figure(json_object_get(calib, "implausible_margin"), "");
}

json_t *kevo_sol_figures_to_json(const struct kevo_sol_figures *f)
{
    json_t *o = json_object(), *peaks = json_object();
    int bad = !o || !peaks;

    for (int u = 0; !bad && u < KEVO_UNIT_COUNT; u++)
        bad = kevo_sol_set_positive(peaks, kevo_unit_name((enum kevo_unit)u), kevo_sol_positive(f->peak_flops[u])) != 0;
    bad = bad || json_object_set_new(o, "bw", json_real(kevo_sol_positive(f->bw_bytes_per_s)));
    bad = bad || json_object_set(o, "peaks", peaks);
    bad = bad || json_object_set_new(o, "launch_floor_s",
                                     json_real(kevo_sol_positive(f->launch_floor_s)));
    bad = bad || json_object_set_new(o, "margin", json_real(kevo_sol_positive(f->margin)));
    bad = bad || kevo_sol_set_positive(o, "launch_gap_s", f->launch_gap_s) != 0;
    json_decref(peaks);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

double kevo_sol_floor(const struct kevo_sol_figures *f, double bytes, double flops,
                      enum kevo_unit unit)
{
    double t = 0.0;

    if (!f)
        return 0.0;
    if (bytes > 0.0 && f->bw_bytes_per_s > 0.0)
        t = bytes / f->bw_bytes_per_s;
    if (flops > 0.0 && (int)unit >= 0 && unit < KEVO_UNIT_COUNT && f->peak_flops[unit] > 0.0) {
        double tf = flops / f->peak_flops[unit];
        t = tf > t ? tf : t;
    }
    if (f->launch_floor_s > t)
        t = f->launch_floor_s;
    return t;
}
