#ifndef SHAREDSTORE_CSQLITE_SHIM_H
#define SHAREDSTORE_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type sharedstore_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

/// sqlite3_db_config is variadic, which Swift cannot call: turns off double-quoted string
/// literals in DML and DDL, so that a quoted name that is not a column is an error, never a
/// string ("kind" read as 'kind').
static inline int sharedstore_sqlite_strict_quotes(sqlite3 *db) {
    int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DML, 0, (int *)0);
    if (rc != SQLITE_OK) return rc;
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DQS_DDL, 0, (int *)0);
}

/// sqlite3_config is variadic too: turns off SQLite's memory statistics, which take a global
/// mutex around every allocation and free (SQLite's advice for speed: SQLITE_DEFAULT_MEMSTATUS=0).
/// Only sqlite3_memory_used, the heap limits and sqlite3_status stop working, and nothing here
/// uses them. It takes effect only before SQLite initializes (SQLITE_MISUSE after: a no-op).
static inline int sharedstore_sqlite_no_memory_statistics(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
#endif
