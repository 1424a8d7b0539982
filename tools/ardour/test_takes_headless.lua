-- Headless Ardour 7.3 (ardour7-lua) test of takes that survive the host, in two runs that
-- takes_kill_test.sh drives:
--   record DIR IMPORT WORK   a session with a stereo track carrying the plugin, saved; the
--       plugin armed while Ardour records from the Dummy's generator (software monitoring, so
--       the plugin hears what Ardour records); when the take's job runs (slowed by
--       SB_FAULT_INJECT=job:slow:MS) with its recording and journal in the insert's scratch
--       folder, a copy of the recording goes to WORK/recorded.wav and WORK/RUNNING is written;
--       then it waits to be killed with SIGKILL.
--   reopen DIR IMPORT WORK   the session loaded again: the plugin shows Resumed, the job count
--       reaches 1, the take's stems.txt lists four stems (its path goes to WORK/stems_txt), and
--       the take's recording and journal are gone.
-- Exit 0 when every assertion held.
-- The one route of a RouteList, as a copy: new_audio_track(...):front() is a reference into the
-- temporary list, which dangles once Lua collects it.
local function only(list) local one; for r in list:iter() do one = r end; return one end
local MODE   = assert(arg[1], "record or reopen")
local DIR    = assert(arg[2], "session dir")
local IMPORT = assert(arg[3], "path of stembridge_import.lua")
local WORK   = assert(arg[4], "work dir")
local URI    = "https://stembridge.org/lv2/stembridge#stereo"
local NAME   = "takes"
local RATE   = 48000
-- control port numbers as Ardour counts them (control ports only, inputs and outputs)
local P_RECORD, P_MODEL, P_STATE, P_JOBS = 0, 3, 9, 13
local S_SEPARATING, S_ERROR, S_RESUMED = 3, 5, 7

ardour = function() end
dofile(IMPORT) -- sb_find_stems_txt, sb_parse_stems_txt

local function now() return ARDOUR.LuaAPI.monotonic_time() / 1e6 end
local function wait_until(cond, timeout, what)
	local t = now()
	while not cond() do
		if now() - t > timeout then error("timeout waiting for " .. what) end
		sleep(0.01)
	end
end
local function param(p, n) return (ARDOUR.LuaAPI.get_processor_param(p, n, true)) end
local function sh(cmd)
	local p = assert(io.popen(cmd))
	local out = p:read("*a")
	p:close()
	return (out:gsub("%s+$", ""))
end
local function touch(path, text)
	local f = assert(io.open(path, "w"))
	f:write(text or "")
	f:close()
end
local TRS = ARDOUR.TransportRequestSource.TRS_UI

local be = AudioEngine:set_backend("None (Dummy)", "", "")
assert(be and not be:isnil(), "set_backend failed")
assert(be:set_driver("Normal Speed") == 0, "set_driver failed")
assert(AudioEngine:set_device_name("Sine Wave 1K, 1/3 Oct") == 0, "set_device_name failed")

if MODE == "record" then
	os.execute("rm -rf '" .. DIR .. "'")
	assert(create_session(DIR, NAME, RATE), "create_session failed")
	-- the plugin records what Ardour records only with software monitoring (../shared/HOSTS.md)
	ARDOUR.config():set_monitoring_model(ARDOUR.MonitorModel.SoftwareMonitoring)
	local tr = only(Session:new_audio_track(2, 2, nil, 1, "Vox", ARDOUR.PresentationInfo.max_order,
		ARDOUR.TrackMode.Normal, true))
	assert(tr and not tr:isnil(), "new_audio_track failed")
	local proc = ARDOUR.LuaAPI.new_plugin(Session, URI, ARDOUR.PluginType.LV2, "")
	assert(not proc:isnil(), "Stembridge not found: is LV2_PATH set?")
	assert(tr:add_processor_by_index(proc, 0, nil, true) == 0, "add_processor_by_index failed")
	wait_until(function() return tr:input():audio(0):connected() end, 5, "input auto-connect")
	assert(ARDOUR.LuaAPI.set_processor_param(proc, P_MODEL, 0)) -- Built-in
	assert(ARDOUR.LuaAPI.set_processor_param(proc, P_RECORD, 1))
	-- the user saved the session before recording; the crash comes later
	assert(Session:save_state("") == 0, "save_state failed")
	local insert = proc:to_stateful():id():to_s()
	local base = Session:path():gsub("/$", "") .. "/plugins/" .. insert .. "/scratch/stembridge"
	touch(WORK .. "/insert", insert)

	tr:rec_enable_control():set_value(1, PBD.GroupControlDisposition.NoGroup)
	Session:maybe_enable_record(false)
	Session:request_locate(RATE, false, ARDOUR.LocateTransportDisposition.MustStop, TRS)
	sleep(0.2)
	Session:request_roll(TRS)
	wait_until(function() return Session:transport_sample() >= 4 * RATE end, 30, "recording")
	Session:request_stop(false, false, TRS)
	wait_until(function() return Session:transport_stopped() end, 10, "stop")
	tr:rec_enable_control():set_value(0, PBD.GroupControlDisposition.NoGroup)
	Session:disable_record(false, false)
	assert(ARDOUR.LuaAPI.set_processor_param(proc, P_RECORD, 0))
	-- the take's job runs, its recording and journal are on disk before it
	local journal, audio = "", ""
	wait_until(function()
		journal = sh("ls -1 '" .. base .. "'/*/*-journal.json 2>/dev/null")
		audio = sh("ls -1 '" .. base .. "'/*/*-recording.wav 2>/dev/null")
		return param(proc, P_STATE) == S_SEPARATING and journal ~= "" and audio ~= ""
	end, 60, "the take's job with its recording and journal on disk")
	print("JOURNAL", journal)
	print("RECORDING", audio)
	assert(param(proc, P_JOBS) == 0, "the job finished before the kill: slow it down more")
	assert(os.execute("cp '" .. audio .. "' '" .. WORK .. "/recorded.wav'"))
	touch(WORK .. "/RUNNING", journal .. "\n")
	print("RUNNING: waiting for SIGKILL")
	io.stdout:flush() -- what it printed, before the kill
	while true do sleep(1) end
end

assert(MODE == "reopen", "unknown mode " .. MODE)
local insert = sh("cat '" .. WORK .. "/insert'")
local journal = sh("cat '" .. WORK .. "/RUNNING'")
assert(load_session(DIR, NAME), "load_session failed")
local r = Session:route_by_name("Vox")
assert(r and not r:isnil(), "track missing after reload")
local proc = r:nth_plugin(0)
assert(not proc:isnil(), "plugin missing after reload")
assert(proc:to_stateful():id():to_s() == insert, "the insert has another id after reload")
local resumed = false
wait_until(function()
	local s = param(proc, P_STATE)
	resumed = resumed or s == S_RESUMED
	return param(proc, P_JOBS) >= 1 or s == S_ERROR
end, 300, "the resumed take's stems")
print("REOPENED state", param(proc, P_STATE), "jobs", param(proc, P_JOBS), "resumed seen", resumed)
assert(param(proc, P_JOBS) == 1, "the resumed take failed (state " .. param(proc, P_STATE) .. ")")
assert(resumed, "the state port never said Resumed")
local txt = sb_find_stems_txt(Session:path():gsub("/$", ""), insert)
assert(txt, "no stems.txt in the insert's scratch folder")
local take = assert(sb_parse_stems_txt(txt))
print("STEMS.TXT", txt, "start", take.start, "files", #take.files)
assert(#take.files == 4, "expected 4 stems")
for _, f in ipairs(take.files) do
	local h = io.open(f.path, "rb")
	assert(h, "stem missing: " .. f.path)
	h:close()
end
touch(WORK .. "/stems_txt", txt)
local function gone(p) local h = io.open(p, "r"); if h then h:close(); return false end return true end
assert(gone(journal), "the journal is still there: " .. journal)
local left = sh("ls -1 '" .. txt:match("^(.*)/[^/]*$") .. "'/*-recording.wav 2>/dev/null")
assert(left == "", "the take's recording is still there after the commit: " .. left)
r, proc = nil, nil
collectgarbage()
close_session()
print("ALL OK")
