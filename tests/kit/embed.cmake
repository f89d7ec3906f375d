# embed.cmake: writes the PTX file IN as a NUL-terminated C array OUT
# (cmake -DIN=... -DOUT=... -P embed.cmake).
file(READ "${IN}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}" "/* generated from ${IN} */\nconst char kit_kernels_ptx[] = {\n${body}0x00};\n")
