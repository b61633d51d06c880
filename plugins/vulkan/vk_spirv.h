/* vk_spirv.h — the embedded SPIR-V of every shader (generated vk_spirv.c). */
#ifndef BP_VK_SPIRV_H
#define BP_VK_SPIRV_H

#include <stddef.h>
#include <stdint.h>

struct vk_spirv_blob {
    const char *name;      /* the shader's file name without .comp */
    const uint32_t *code;
    size_t size;           /* bytes */
};

/* Terminated by an entry with name NULL. */
extern const struct vk_spirv_blob vk_spirv[];

#endif
