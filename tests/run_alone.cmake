# run_alone.cmake — read by ctest after the cases doctest_discover_tests found (tests/CMakeLists.txt
# adds it last): the cases that need the GPU to themselves run with no other test beside them
# (RUN_SERIAL). A RESOURCE_LOCK would hold off only the cases that name the same lock, and every
# case that allocates on the GPU would have to.
foreach(name IN LISTS test_cuda_paths_TESTS)
  if(name MATCHES "out of memory")  # it fills three quarters of the free memory, measured first
    set_tests_properties("${name}" PROPERTIES RUN_SERIAL TRUE)
  endif()
endforeach()
