/*
 * report_page - the HTML around the plots of `kevo report` (report_int.h): the page's head
 * and its one inline style sheet, sections, table cells, notes, legends, and how numbers
 * and names are written. Below every other report file; calls none of them.
 */
#include "ctl/report_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The page's style: readable printed, on a phone and without any script. */
static const char css[] =
    "body{font:14px/1.45 Helvetica,Arial,sans-serif;color:#222;max-width:1020px;"
    "margin:0 auto;padding:16px 20px 40px;background:#fafafa}\n"
    "h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:0 0 8px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}\n"
    "section{background:#fff;border:1px solid #e2e2e2;border-radius:6px;padding:12px 16px;"
    "margin:14px 0}\n"
    "svg{max-width:100%;height:auto;display:block;margin:6px 0}\n"
    ".grid{display:flex;flex-wrap:wrap;gap:8px}.grid svg{flex:0 1 auto}\n"
    "table{border-collapse:collapse;margin:6px 0;font-size:13px}\n"
    "th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f3f3f3;font-weight:600}td.n{text-align:right;font-variant-numeric:"
    "tabular-nums;white-space:nowrap}\n"
    "table.facts td:first-child{color:#666;white-space:nowrap}\n"
    ".note{color:#666;font-size:13px;margin:4px 0}\n"
    ".legend{font-size:12px;margin:4px 0}.legend span{margin-right:14px;white-space:nowrap}\n"
    ".sw{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:4px}\n"
    "pre{background:#f6f8fa;border:1px solid #e5e5e5;padding:8px;overflow-x:auto;"
    "font:12px/1.4 Menlo,Consolas,monospace;white-space:pre}\n"
    "pre .add{background:#e6ffec;display:block}pre .del{background:#ffebe9;display:block}\n"
    "pre .hunk{color:#8250df;display:block}\n"
    "td.msg{max-width:560px;overflow-wrap:anywhere;font-size:12px}\n"
    ".ok{color:#1a7f37;font-weight:600}.bad{color:#cf222e;font-weight:600}\n"
    "nav{font-size:13px}nav a{margin-right:10px;color:#0550ae}\n";

void rep_page_open(struct kevo_svg *w, const char *title)
{
    kevo_svg_add(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<meta name=\"generator\" content=\"kevo " KEVO_VERSION "\">\n<title>");
    kevo_svg_esc(w, title);
    kevo_svg_add(w, "</title>\n<style>\n");
    kevo_svg_add(w, css);
    kevo_svg_add(w, "</style>\n</head>\n<body>\n");
}

void rep_page_close(struct kevo_svg *w)
{
    kevo_svg_add(w, "<p class=\"note\">Written by kevo " KEVO_VERSION
                    " (kevo report): one file, nothing loaded from elsewhere.</p>\n"
                    "</body>\n</html>\n");
}

void rep_section(struct kevo_svg *w, const char *id, const char *title)
{
    kevo_svg_addf(w, "<section id=\"%s\">\n<h2>", id);
    kevo_svg_esc(w, title);
    kevo_svg_add(w, "</h2>\n");
}

void rep_section_close(struct kevo_svg *w)
{
    kevo_svg_add(w, "</section>\n");
}

void rep_note(struct kevo_svg *w, const char *text)
{
    kevo_svg_add(w, "<p class=\"note\">");
    kevo_svg_esc(w, text);
    kevo_svg_add(w, "</p>\n");
}

void rep_td(struct kevo_svg *w, const char *text, int num)
{
    kevo_svg_add(w, num ? "<td class=\"n\">" : "<td>");
    kevo_svg_esc(w, text);
    kevo_svg_add(w, "</td>");
}

void rep_td_num(struct kevo_svg *w, double v, void (*fmt)(double, char *, size_t))
{
    char s[48];

    if (isfinite(v))
        fmt(v, s, sizeof s);
    else
        snprintf(s, sizeof s, "-");
    rep_td(w, s, 1);
}

void rep_td_int(struct kevo_svg *w, int64_t v)
{
    char s[32];

    snprintf(s, sizeof s, v < 0 ? "-" : "%lld", (long long)v);
    rep_td(w, s, 1);
}

void rep_legend(struct kevo_svg *w, char *const *names, int n)
{
    kevo_svg_add(w, "<div class=\"legend\">");
    for (int i = 0; i < n; i++) {
        kevo_svg_addf(w, "<span><i class=\"sw\" style=\"background:%s\"></i>",
                      kevo_svg_color(i));
        kevo_svg_esc(w, names[i]);
        kevo_svg_add(w, "</span>");
    }
    kevo_svg_add(w, "</div>\n");
}

void rep_model_name(const char *model, char *out, size_t n)
{
    const char *at = model ? strchr(model, '@') : NULL;

    if (!model)
        snprintf(out, n, "?");
    else
        snprintf(out, n, "%.*s", at ? (int)(at - model) : (int)strlen(model), model);
}

void rep_fmt_x(double v, char *out, size_t n)
{
    if (!isfinite(v) || v <= 0)
        snprintf(out, n, "-");
    else
        snprintf(out, n, v >= 100 ? "%.0fx" : v >= 10 ? "%.1fx" : "%.2fx", v);
}

void rep_fmt_bps(double v, char *out, size_t n)
{
    kevo_svg_fmt_unit(v, "B/s", out, n);
}

void rep_fmt_flops(double v, char *out, size_t n)
{
    kevo_svg_fmt_unit(v, "FLOP/s", out, n);
}

void rep_fmt_plain(double v, char *out, size_t n)
{
    snprintf(out, n, "%g", v);
}

void rep_cand_key(const struct rep_cand *c, char *out, size_t n)
{
    if (c->model)
        snprintf(out, n, "%s \xc2\xb7 %s", c->op, c->model);
    else
        snprintf(out, n, "%s", c->op);
}

void rep_fmt_sizes(const json_t *sizes, char *out, size_t n)
{
    const char *k;
    json_t *v;
    size_t len = 0;

    out[0] = '\0';
    json_object_foreach((json_t *)sizes, k, v) {
        int m = snprintf(out + len, n - len, "%s%s=%lld", len ? " " : "", k,
                         (long long)json_integer_value(v));
        if (m < 0 || (size_t)m >= n - len)
            break;
        len += (size_t)m;
    }
}

double rep_num(const json_t *v)
{
    return json_is_number(v) ? json_number_value(v) : NAN;
}

double rep_get(const json_t *o, const char *key)
{
    return rep_num(json_object_get(o, key));
}

const char *rep_str(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s ? s : dflt;
}

const struct rep_cand *rep_cand_find(const struct rep *r, int64_t id)
{
    int lo = 0, hi = r->n - 1;

    while (id && lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->c[mid].id == id)
            return &r->c[mid];
        if (r->c[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}
