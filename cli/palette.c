/*
 * palette.c - HSV to RGB and the golden-ratio mask palette (see palette.h).
 */
#include "palette.h"

#include <math.h>

void palette_hsv(double h, double s, double v, double rgb[3])
{
    double hh = (h - floor(h)) * 6.0;  /* 0..6; 6 only when frac rounds to 1 */
    int i = (int)hh;
    if (i > 5) i = 5;
    double f = hh - i;
    double p = v * (1 - s), q = v * (1 - s * f), t = v * (1 - s * (1 - f));
    double r, g, b;
    switch (i) {
    case 0: r = v; g = t; b = p; break;
    case 1: r = q; g = v; b = p; break;
    case 2: r = p; g = v; b = t; break;
    case 3: r = p; g = q; b = v; break;
    case 4: r = t; g = p; b = v; break;
    default: r = v; g = p; b = q; break;
    }
    rgb[0] = r;
    rgb[1] = g;
    rgb[2] = b;
}

void palette_mask(uint32_t k, uint8_t rgb[3])
{
    double c[3];
    palette_hsv(k * 0.618033988749895, 0.65, 0.95, c);
    for (int j = 0; j < 3; j++) rgb[j] = (uint8_t)lround(255 * c[j]);
}
