// Catch2's main lives alone in this file so it is compiled once.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
