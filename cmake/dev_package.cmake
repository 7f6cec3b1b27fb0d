# Run by the dev_package target (cmake -P): assembles DEST, a runnable
# davincirunsdk package for PYTHONPATH, from symbolic links to the package's
# sources in SOURCE and to the module and programs just built, so that
# editing a .py file needs no step and a C++ change only an incremental build.
#   -DSOURCE=<repo>/python/davincirunsdk -DDEST=<build>/python/davincirunsdk
#   -DMODULE=<_core.so> -DPROGRAMS=<davincirun;davincirun-supervisor>
file(GLOB_RECURSE sources RELATIVE ${SOURCE} ${SOURCE}/*)
file(REMOVE_RECURSE ${DEST})
foreach(path IN LISTS sources)
  if(path MATCHES "__pycache__|\\.pyc$|\\.so$|^bin/")
    continue()
  endif()
  get_filename_component(dir ${DEST}/${path} DIRECTORY)
  file(MAKE_DIRECTORY ${dir})
  file(CREATE_LINK ${SOURCE}/${path} ${DEST}/${path} SYMBOLIC)
endforeach()
get_filename_component(module_name ${MODULE} NAME)
file(CREATE_LINK ${MODULE} ${DEST}/${module_name} SYMBOLIC)
file(MAKE_DIRECTORY ${DEST}/bin)
foreach(program IN LISTS PROGRAMS)
  get_filename_component(name ${program} NAME)
  file(CREATE_LINK ${program} ${DEST}/bin/${name} SYMBOLIC)
endforeach()
