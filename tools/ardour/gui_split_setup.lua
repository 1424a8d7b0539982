-- usage: ardour7-lua gui_split_setup.lua DIR NAME
-- An empty 48 kHz session on the Dummy backend ("Normal Speed", "Silence": the GUI test opens it
-- with the same, or a modal dialog about the changed device waits for a click).
local dir, name = arg[1], arg[2]
os.execute ("rm -rf '" .. dir .. "'")
local be = AudioEngine:set_backend ("None (Dummy)", "", "")
assert (be and not be:isnil (), "no Dummy backend")
assert (be:set_driver ("Normal Speed") == 0, "set_driver failed")
assert (AudioEngine:set_device_name ("Silence") == 0, "set_device_name failed")
assert (create_session (dir, name, 48000), "create_session failed")
Session:save_state ("")
close_session ()
-- OSC on: the test quits Ardour through it
local f = io.open (dir .. "/" .. name .. ".ardour", "r")
local xml = f:read ("a")
f:close ()
f = io.open (dir .. "/" .. name .. ".ardour", "r")
xml = f:read ("a")
f:close ()
f = io.open (dir .. "/" .. name .. ".ardour", "w")
f:write ((xml:gsub ('<Protocol name="Open Sound Control %(OSC%)" active="0"/>',
	'<Protocol name="Open Sound Control (OSC)" active="1"/>')))
f:close ()
