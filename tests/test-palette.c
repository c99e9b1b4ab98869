/*
 * test-palette.c - the programs' colours (cli/palette.h) against colours
 * written down here: the mask palette of sa1b-export(1) (the first eight
 * and two far ones, worked out from its definition: hue frac(k * 0.618...),
 * saturation 0.65, value 0.95, 255 c rounded half away from zero), and
 * palette_hsv at the six sectors' edges, a hue outside [0, 1) and a grey.
 * sa1b-export's overlays and test-shard-gen's check of them share the
 * palette's code, so a change to it would pass there: it fails here.
 */
#include <math.h>

#include "palette.h"
#include "tap.h"

int main(void)
{
    static const struct {
        uint32_t k;
        uint8_t rgb[3];
    } want[] = {{0, {242, 85, 85}},   {1, {85, 131, 242}}, {2, {177, 242, 85}},   {3, {242, 85, 223}},
                {4, {85, 242, 216}},  {5, {242, 170, 85}}, {6, {124, 85, 242}},   {7, {91, 242, 85}},
                {100, {214, 85, 242}}, {65535, {242, 85, 219}}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        uint8_t c[3];
        palette_mask(want[i].k, c);
        tap_ok(c[0] == want[i].rgb[0] && c[1] == want[i].rgb[1] && c[2] == want[i].rgb[2],
               "mask colour %u is (%u, %u, %u): (%u, %u, %u)", want[i].k, want[i].rgb[0], want[i].rgb[1],
               want[i].rgb[2], c[0], c[1], c[2]);
    }
    /* pure hues at the sectors' starts (s = v = 1), a hue of -0.25 (= 0.75)
     * and a grey (s = 0) */
    static const struct {
        double h, s, v, rgb[3];
    } hsv[] = {{0.0, 1, 1, {1, 0, 0}},     {1 / 6.0, 1, 1, {1, 1, 0}}, {2 / 6.0, 1, 1, {0, 1, 0}},
               {3 / 6.0, 1, 1, {0, 1, 1}}, {4 / 6.0, 1, 1, {0, 0, 1}}, {5 / 6.0, 1, 1, {1, 0, 1}},
               {-0.25, 1, 0.5, {0.25, 0, 0.5}}, {0.3, 0, 0.4, {0.4, 0.4, 0.4}}};
    for (size_t i = 0; i < sizeof hsv / sizeof *hsv; i++) {
        double c[3];
        palette_hsv(hsv[i].h, hsv[i].s, hsv[i].v, c);
        int ok = 1;
        for (int j = 0; j < 3; j++) ok &= fabs(c[j] - hsv[i].rgb[j]) < 1e-12;
        tap_ok(ok, "hsv(%.4f, %.2f, %.2f) = (%.3f, %.3f, %.3f): (%.3f, %.3f, %.3f)", hsv[i].h, hsv[i].s, hsv[i].v,
               hsv[i].rgb[0], hsv[i].rgb[1], hsv[i].rgb[2], c[0], c[1], c[2]);
    }
    return tap_done();
}
