/* The log's configuration keys (log.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/core.h"

static const struct config_enum_value log_formats[] = {
        { "auto", LOG_FORMAT_AUTO },
        { "text", LOG_FORMAT_TEXT },
        { "json", LOG_FORMAT_JSON },
        { "journal", LOG_FORMAT_JOURNAL },
        { NULL, 0 },
};

static const struct config_enum_value log_levels[] = {
        { "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
        { "info", LOG_INFO }, { "debug", LOG_DEBUG },     { NULL, 0 },
};

#define OFF(f) offsetof(struct log_settings, f)

static const struct config_item log_items[] = {
        { "log.format", CONFIG_ENUM, "auto", OFF(format),
          "log output: journal under systemd, text or JSON on stderr", log_formats, 0, CONFIG_NO_RANGE,
          false },
        { "log.level", CONFIG_ENUM, "info", OFF(level), "most verbose level logged", log_levels, 0,
          CONFIG_NO_RANGE, false },
};

const struct config_section log_config_section = { "log", log_items, ARRAY_SIZE(log_items) };
