/*
 * The fields of profile.proto (package perftools.profiles), one table a
 * message, one field a line with its type, as Go's runtime/pprof names
 * them (tagProfile_SampleType ...). The writer (profile.c, through pb.c)
 * and the reader (decode.c) take the numbers from here and nowhere else.
 * Fields numbered in a row from 1 are written as one run of varints
 * (pb_varints_message), so their order here is the message's.
 */
#ifndef PPROF_PROFILE_FIELDS_H
#define PPROF_PROFILE_FIELDS_H

/* message Profile */
enum {
    PROFILE_F_SAMPLE_TYPE = 1,          /* repeated ValueType */
    PROFILE_F_SAMPLE = 2,               /* repeated Sample */
    PROFILE_F_MAPPING = 3,              /* repeated Mapping */
    PROFILE_F_LOCATION = 4,             /* repeated Location */
    PROFILE_F_FUNCTION = 5,             /* repeated Function */
    PROFILE_F_STRING_TABLE = 6,         /* repeated string */
    PROFILE_F_DROP_FRAMES = 7,          /* int64 (string index) */
    PROFILE_F_KEEP_FRAMES = 8,          /* int64 (string index) */
    PROFILE_F_TIME_NANOS = 9,           /* int64 */
    PROFILE_F_DURATION_NANOS = 10,      /* int64 */
    PROFILE_F_PERIOD_TYPE = 11,         /* ValueType */
    PROFILE_F_PERIOD = 12,              /* int64 */
    PROFILE_F_COMMENT = 13,             /* repeated int64 (string index) */
    PROFILE_F_DEFAULT_SAMPLE_TYPE = 14, /* int64 (string index) */
};

/* message ValueType */
enum {
    VALUETYPE_F_TYPE = 1, /* int64 (string index) */
    VALUETYPE_F_UNIT = 2, /* int64 (string index) */
};

/* message Sample */
enum {
    SAMPLE_F_LOCATION_ID = 1, /* repeated uint64 */
    SAMPLE_F_VALUE = 2,       /* repeated int64 */
    SAMPLE_F_LABEL = 3,       /* repeated Label */
};

/* message Label */
enum {
    LABEL_F_KEY = 1,      /* int64 (string index) */
    LABEL_F_STR = 2,      /* int64 (string index) */
    LABEL_F_NUM = 3,      /* int64 */
    LABEL_F_NUM_UNIT = 4, /* int64 (string index) */
};

/* message Mapping */
enum {
    MAPPING_F_ID = 1,                 /* uint64 */
    MAPPING_F_MEMORY_START = 2,       /* uint64 */
    MAPPING_F_MEMORY_LIMIT = 3,       /* uint64 */
    MAPPING_F_FILE_OFFSET = 4,        /* uint64 */
    MAPPING_F_FILENAME = 5,           /* int64 (string index) */
    MAPPING_F_BUILD_ID = 6,           /* int64 (string index) */
    MAPPING_F_HAS_FUNCTIONS = 7,      /* bool */
    MAPPING_F_HAS_FILENAMES = 8,      /* bool */
    MAPPING_F_HAS_LINE_NUMBERS = 9,   /* bool */
    MAPPING_F_HAS_INLINE_FRAMES = 10, /* bool */
};

/* message Location */
enum {
    LOCATION_F_ID = 1,         /* uint64 */
    LOCATION_F_MAPPING_ID = 2, /* uint64 */
    LOCATION_F_ADDRESS = 3,    /* uint64 */
    LOCATION_F_LINE = 4,       /* repeated Line */
};

/* message Line */
enum {
    LINE_F_FUNCTION_ID = 1, /* uint64 */
    LINE_F_LINE = 2,        /* int64 */
};

/* message Function */
enum {
    FUNCTION_F_ID = 1,          /* uint64 */
    FUNCTION_F_NAME = 2,        /* int64 (string index) */
    FUNCTION_F_SYSTEM_NAME = 3, /* int64 (string index) */
    FUNCTION_F_FILENAME = 4,    /* int64 (string index) */
    FUNCTION_F_START_LINE = 5,  /* int64 */
};

#endif
