/* tokenizer_unicode.c — UTF-8, category classes and GPT-2's byte mapping. */
#include "tokenizer_unicode.h"

enum bp_ucat bp_ucat_of(uint32_t cp)
{
    if (cp > 0x10FFFF) return BP_UCAT_UNDEFINED;
    size_t lo = 0, hi = bp_ucat_n_ranges;   /* last range with first <= cp */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (bp_ucat_ranges[mid].first <= cp) lo = mid;
        else hi = mid;
    }
    return (enum bp_ucat)bp_ucat_ranges[lo].cat;
}

bool bp_uni_is_space(uint32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t bp_utf8_lead_len(uint8_t b)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[b >> 4];
}

uint32_t bp_utf8_decode(const uint8_t *s, size_t n, size_t *len)
{
    const uint8_t b = s[0];
    size_t need;
    uint32_t cp;
    if (!(b & 0x80)) { *len = 1; return b; }
    if (!(b & 0x40)) goto bad;
    if (!(b & 0x20)) { need = 2; cp = b & 0x1F; }
    else if (!(b & 0x10)) { need = 3; cp = b & 0x0F; }
    else if (!(b & 0x08)) { need = 4; cp = b & 0x07; }
    else goto bad;
    if (n < need) goto bad;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) goto bad;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *len = need;
    return cp;
bad:
    *len = 1;
    return 0xFFFD;
}

size_t bp_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int bp_utf8_valid_len(const uint8_t *s, size_t n)
{
    const uint8_t b = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;   /* the second byte's range (RFC 3629) */
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 0;
    for (size_t i = 1; i < need; i++) {
        if (i >= n) return -1;
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) return 0;
    }
    return (int)need;
}

bool bp_utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int l = bp_utf8_valid_len(s + i, n - i);
        if (l <= 0) return false;
        i += (size_t)l;
    }
    return true;
}

size_t bp_utf8_complete_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int l = bp_utf8_valid_len(s + i, n - i);
        if (l < 0) break;
        i += l ? (size_t)l : 1;
    }
    return i;
}

/* GPT-2 keeps the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ as themselves
 * and moves the other 68 to U+0100 upwards, in byte order. */
static bool byte_is_self(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t bp_byte_to_cp(uint8_t b)
{
    if (byte_is_self(b)) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++) n += !byte_is_self(c);
    return 256 + n;
}

int bp_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_self(cp) ? (int)cp : -1;
    uint32_t n = 256;
    for (unsigned c = 0; c < 256; c++)
        if (!byte_is_self(c) && n++ == cp) return (int)c;
    return -1;
}
