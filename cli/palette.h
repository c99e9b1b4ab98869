/*
 * palette.h - the programs' colours: HSV to RGB, and the mask palette of
 * sa1b-export(1) (golden-ratio hue steps).  Not part of libsa1b.
 *
 * Both are pure functions of their arguments; sa1b-synth's images and
 * sa1b-export's overlays depend on them bit for bit, so any change to the
 * arithmetic below changes every synthetic tar and every overlay.
 */
#ifndef SA1B_PALETTE_H
#define SA1B_PALETTE_H

#include <stdint.h>

/* Converts hue h (in turns; any real, only frac(h) = h - floor(h) counts),
 * saturation s and value v (both 0..1) to rgb[3], each channel 0..1 in
 * double precision, unrounded: the classic six-sector formula with
 * p = v(1-s), q = v(1-s f), t = v(1-s(1-f)), f the position in the sector. */
void palette_hsv(double h, double s, double v, double rgb[3]);

/* Colour k of the mask palette: hue frac(k * 0.618033988749895),
 * saturation 0.65, value 0.95, each channel 255 * c rounded to nearest
 * (halves away from zero).  Neighbouring k differ clearly in hue. */
void palette_mask(uint32_t k, uint8_t rgb[3]);

#endif
