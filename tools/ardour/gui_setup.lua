-- usage: ardour7-lua gui_setup.lua DIR NAME
-- A 48 kHz Dummy session with a stereo track "Guitar" holding one recorded region and a track
-- "Keys" after it, for the GUI importer test (gui_import_test.sh): the stem tracks must land
-- between the two.
-- The one route of a RouteList, as a copy: new_audio_track(...):front() is a reference into the
-- temporary list, which dangles once Lua collects it.
local function only(list) local one; for r in list:iter() do one = r end; return one end
local dir, name = arg[1], arg[2]
local TRS = ARDOUR.TransportRequestSource.TRS_UI
local function now() return ARDOUR.LuaAPI.monotonic_time() / 1e6 end
local function wait_until(cond, timeout, what)
	local t = now()
	while not cond() do
		if now() - t > timeout then error("timeout waiting for " .. what) end
		sleep(0.01)
	end
end
os.execute("rm -rf '" .. dir .. "'")
local be = AudioEngine:set_backend("None (Dummy)", "", "")
assert(be:set_driver("10x Speed") == 0)
assert(AudioEngine:set_device_name("Sine Wave 1K, 1/3 Oct") == 0)
assert(create_session(dir, name, 48000), "create_session failed")
local tr = only(Session:new_audio_track(2, 2, nil, 1, "Guitar", ARDOUR.PresentationInfo.max_order,
	ARDOUR.TrackMode.Normal, true))
wait_until(function() return tr:input():audio(0):connected() end, 5, "auto-connect")
tr:rec_enable_control():set_value(1, PBD.GroupControlDisposition.NoGroup)
Session:maybe_enable_record(false)
Session:request_locate(48000, false, ARDOUR.LocateTransportDisposition.MustStop, TRS)
sleep(0.1)
Session:request_roll(TRS)
wait_until(function() return Session:transport_sample() >= 48000 * 3 end, 30, "recording")
Session:request_stop(false, false, TRS)
wait_until(function() return Session:transport_stopped() and tr:playlist():region_list():size() > 0 end, 10, "capture")
tr:rec_enable_control():set_value(0, PBD.GroupControlDisposition.NoGroup)
Session:disable_record(false, false)
for r in tr:playlist():region_list():iter() do print("REGION", r:position():samples(), r:length():samples()) end
only(Session:new_audio_track(2, 2, nil, 1, "Keys", ARDOUR.PresentationInfo.max_order,
	ARDOUR.TrackMode.Normal, true))
tr = nil
collectgarbage()
Session:save_state("", false, false, false)
close_session()
